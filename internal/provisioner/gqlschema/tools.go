//go:build tools

package gqlschema

// Pins the gqlgen code generator in go.mod so `go generate` uses the same version.
import (
	_ "github.com/99designs/gqlgen"
)
