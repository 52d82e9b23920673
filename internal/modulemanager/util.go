package modulemanager

import (
	"sort"

	"github.com/opencontainers/go-digest"
)

func sortStrings(s []string) { sort.Strings(s) }

func digestOf(ref string) digest.Digest { return digest.Digest(ref) }
