package module

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/errdef"
)

// A local archive is an OCI image layout directory; a component version is tagged there with
// "<component>:<version tag>" (ArchiveRef), so modules of one version do not clash. Archives of
// earlier releases tagged the version alone; they are still read.

// ArchiveRef is the archive tag of a component version.
func ArchiveRef(component, version string) string {
	return component + ":" + VersionTag(version)
}

// openArchive opens (creating) the OCI layout at dir; a directory that holds other files but is
// no OCI layout is refused, so an unrelated index.json is never overwritten.
func openArchive(ctx context.Context, dir string) (*oci.Store, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open archive %s: %w", dir, err)
	}
	if len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, ocispec.ImageLayoutFile)); err != nil {
			return nil, fmt.Errorf("archive %s: not empty and not an OCI image layout (no %s): refusing to write into it", dir, ocispec.ImageLayoutFile)
		}
	}
	store, err := oci.NewWithContext(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("open archive %s: %w", dir, err)
	}
	return store, nil
}

// SaveArchive writes a component version into the OCI layout at dir (created if needed).
func SaveArchive(ctx context.Context, dir string, a *Artifact) (*Packed, error) {
	p, err := a.Pack()
	if err != nil {
		return nil, err
	}
	store, err := openArchive(ctx, dir)
	if err != nil {
		return nil, err
	}
	descs := append([]ocispec.Descriptor{p.Config}, p.Layers...)
	for _, desc := range descs {
		if err := store.Push(ctx, desc, bytes.NewReader(p.Contents[desc.Digest])); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
			return nil, fmt.Errorf("archive %s: blob %s: %w", dir, desc.Digest, err)
		}
	}
	if err := store.Push(ctx, p.Manifest, bytes.NewReader(p.ManifestJSON)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return nil, fmt.Errorf("archive %s: manifest: %w", dir, err)
	}
	if err := store.Tag(ctx, p.Manifest, ArchiveRef(a.Descriptor.Component.Name, a.Descriptor.Component.Version)); err != nil {
		return nil, fmt.Errorf("archive %s: tag: %w", dir, err)
	}
	return p, nil
}

// LoadArchive reads a component version from the OCI layout at dir. component and version may
// each be empty when the archive holds only one match.
func LoadArchive(ctx context.Context, dir, component, version string) (*Artifact, error) {
	if _, err := os.Stat(filepath.Join(dir, ocispec.ImageLayoutFile)); err != nil {
		return nil, fmt.Errorf("archive %s: not an OCI image layout: %w", dir, err)
	}
	store, err := oci.NewWithContext(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("open archive %s: %w", dir, err)
	}
	var tags []string
	if err := store.Tags(ctx, "", func(page []string) error { tags = append(tags, page...); return nil }); err != nil {
		return nil, fmt.Errorf("archive %s: %w", dir, err)
	}
	var match []string
	for _, tag := range tags {
		name, v, ok := strings.Cut(tag, ":")
		if !ok { // an archive of an earlier release: the version alone
			name, v = "", tag
		}
		if (component == "" || name == "" || name == component) && (version == "" || TagVersion(v) == version) {
			match = append(match, tag)
		}
	}
	want := strings.Trim(component+":"+version, ":")
	switch {
	case len(match) == 0:
		return nil, fmt.Errorf("archive %s holds no %s (it holds %v)", dir, orAny(want), tags)
	case len(match) > 1:
		return nil, fmt.Errorf("archive %s holds %d matches of %s %v: name one as NAME:VERSION", dir, len(match), orAny(want), match)
	}
	a, err := Load(ctx, store, match[0])
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", dir, err)
	}
	if component != "" && a.Descriptor.Component.Name != component {
		return nil, fmt.Errorf("archive %s: %s holds component %s, not %s", dir, match[0], a.Descriptor.Component.Name, component)
	}
	return a, nil
}

func orAny(s string) string {
	if s == "" {
		return "component version"
	}
	return s
}

// Load reads a component version from an OCI target (registry repository or archive). The
// manifest, config and descriptor layer must match their digests; local blobs are read as they
// are, so Verify can name any layer whose content changed. Layers over DefaultMaxResourceSize
// are refused.
func Load(ctx context.Context, t oras.ReadOnlyTarget, ref string) (*Artifact, error) {
	return load(ctx, t, ref, DefaultMaxResourceSize, false)
}

// load reads a component version; checked also verifies every local blob's digest, and errors
// name the resource a layer belongs to.
func load(ctx context.Context, t oras.ReadOnlyTarget, ref string, max int64, checked bool) (*Artifact, error) {
	st := &stored{content: map[digest.Digest][]byte{}}
	mdesc, m, cfg, cd, err := loadDescriptor(ctx, t, ref, st)
	if err != nil {
		return nil, err
	}
	st.manifest = mdesc
	st.blobs = append([]ocispec.Descriptor{m.Config}, m.Layers...)
	a := &Artifact{Descriptor: cd, Blobs: map[digest.Digest]Blob{}, stored: st}
	for _, l := range m.Layers {
		if l.Digest == cfg.ComponentDescriptorLayer.Digest {
			continue
		}
		what := "layer " + l.Digest.String()
		if r := cd.resourceByBlob(l.Digest); r != nil {
			what = "resource " + r.Name + ": " + what
		}
		if l.Size > max {
			return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", what, ErrTooLarge, l.Size, max)
		}
		var data []byte
		if checked {
			data, err = fetchChecked(ctx, t, l, "content")
		} else {
			data, err = fetchRaw(ctx, t, l)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		a.Blobs[l.Digest] = Blob{MediaType: l.MediaType, Data: data}
		st.content[l.Digest] = data
	}
	return a, nil
}

// stored is a loaded component version's OCI content exactly as it was read.
type stored struct {
	manifest ocispec.Descriptor
	// blobs are the config and the layers.
	blobs   []ocispec.Descriptor
	content map[digest.Digest][]byte
}

// loadDescriptor reads a component version's manifest, config and descriptor.
func loadDescriptor(ctx context.Context, t oras.ReadOnlyTarget, ref string, st *stored) (ocispec.Descriptor, ocispec.Manifest, componentConfig, *ComponentDescriptor, error) {
	var m ocispec.Manifest
	var cfg componentConfig
	mdesc, err := t.Resolve(ctx, ref)
	if err != nil {
		return mdesc, m, cfg, nil, fmt.Errorf("resolve %s: %w", ref, err)
	}
	manifestJSON, err := fetchChecked(ctx, t, mdesc, "manifest")
	if err != nil {
		return mdesc, m, cfg, nil, err
	}
	st.content[mdesc.Digest] = manifestJSON
	if err := json.Unmarshal(manifestJSON, &m); err != nil {
		return mdesc, m, cfg, nil, fmt.Errorf("parse manifest: %w", err)
	}
	if m.Config.MediaType != MediaTypeComponentConfig {
		return mdesc, m, cfg, nil, fmt.Errorf("%s is not a component version (config media type %q)", ref, m.Config.MediaType)
	}
	cfgJSON, err := fetchChecked(ctx, t, m.Config, "config")
	if err != nil {
		return mdesc, m, cfg, nil, err
	}
	st.content[m.Config.Digest] = cfgJSON
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		return mdesc, m, cfg, nil, fmt.Errorf("parse component config: %w", err)
	}
	cdTar, err := fetchChecked(ctx, t, cfg.ComponentDescriptorLayer, "component descriptor layer")
	if err != nil {
		return mdesc, m, cfg, nil, err
	}
	st.content[cfg.ComponentDescriptorLayer.Digest] = cdTar
	cdYAML, err := untarFile(cdTar, DescriptorFileName)
	if err != nil {
		return mdesc, m, cfg, nil, err
	}
	cd, err := ParseDescriptor(cdYAML)
	if err != nil {
		return mdesc, m, cfg, nil, err
	}
	return mdesc, m, cfg, cd, nil
}

// resourceByBlob is the local resource whose blob has digest d, or nil.
func (cd *ComponentDescriptor) resourceByBlob(d digest.Digest) *Resource {
	for i, r := range cd.Component.Resources {
		if r.Access.Type == AccessTypeLocalBlob && r.Access.LocalReference == d.String() {
			return &cd.Component.Resources[i]
		}
	}
	return nil
}

func fetchRaw(ctx context.Context, t oras.ReadOnlyTarget, desc ocispec.Descriptor) ([]byte, error) {
	rc, err := t.Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, desc.Size+1))
}

func fetchChecked(ctx context.Context, t oras.ReadOnlyTarget, desc ocispec.Descriptor, what string) ([]byte, error) {
	data, err := fetchRaw(ctx, t, desc)
	if err != nil {
		return nil, fmt.Errorf("fetch %s %s: %w", what, desc.Digest, err)
	}
	if got := digest.FromBytes(data); got != desc.Digest {
		return nil, fmt.Errorf("%s %s: %w (its content now has digest %s)", what, desc.Digest, ErrContentTampering, got)
	}
	return data, nil
}

// labelString is a descriptor label's value as a string ("" if missing).
func (cd *ComponentDescriptor) labelString(name string) string {
	for _, l := range cd.Component.Labels {
		if l.Name == name {
			if s, ok := l.Value.(string); ok {
				return s
			}
			return fmt.Sprint(l.Value)
		}
	}
	return ""
}
