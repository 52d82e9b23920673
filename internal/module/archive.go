package module

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/errdef"
)

// A local archive is an OCI image layout directory; a component version is tagged with its
// version there.

func openArchive(dir string) (*oci.Store, error) {
	store, err := oci.New(dir)
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
	store, err := openArchive(dir)
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
	if err := store.Tag(ctx, p.Manifest, a.Descriptor.Component.Version); err != nil {
		return nil, fmt.Errorf("archive %s: tag: %w", dir, err)
	}
	return p, nil
}

// LoadArchive reads a component version from the OCI layout at dir; version may be empty when
// the archive holds one version.
func LoadArchive(ctx context.Context, dir, version string) (*Artifact, error) {
	store, err := oci.NewWithContext(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("open archive %s: %w", dir, err)
	}
	if version == "" {
		var tags []string
		if err := store.Tags(ctx, "", func(page []string) error { tags = append(tags, page...); return nil }); err != nil {
			return nil, fmt.Errorf("archive %s: %w", dir, err)
		}
		if len(tags) != 1 {
			return nil, fmt.Errorf("archive %s holds %d versions %v: name one", dir, len(tags), tags)
		}
		version = tags[0]
	}
	a, err := Load(ctx, store, version)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", dir, err)
	}
	return a, nil
}

// Load reads a component version from an OCI target (registry repository or archive). The
// manifest, config and descriptor layer must match their digests; local blobs are read as they
// are, so Verify can name any layer whose content changed.
func Load(ctx context.Context, t oras.ReadOnlyTarget, ref string) (*Artifact, error) {
	mdesc, err := t.Resolve(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", ref, err)
	}
	manifestJSON, err := fetchChecked(ctx, t, mdesc, "manifest")
	if err != nil {
		return nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(manifestJSON, &m); err != nil {
		return nil, fmt.Errorf("parse manifest: %w", err)
	}
	if m.Config.MediaType != MediaTypeComponentConfig {
		return nil, fmt.Errorf("%s is not a component version (config media type %q)", ref, m.Config.MediaType)
	}
	cfgJSON, err := fetchChecked(ctx, t, m.Config, "config")
	if err != nil {
		return nil, err
	}
	var cfg componentConfig
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		return nil, fmt.Errorf("parse component config: %w", err)
	}
	cdTar, err := fetchChecked(ctx, t, cfg.ComponentDescriptorLayer, "component descriptor layer")
	if err != nil {
		return nil, err
	}
	cdYAML, err := untarFile(cdTar, DescriptorFileName)
	if err != nil {
		return nil, err
	}
	cd, err := ParseDescriptor(cdYAML)
	if err != nil {
		return nil, err
	}
	a := &Artifact{Descriptor: cd, Blobs: map[digest.Digest]Blob{}}
	for _, l := range m.Layers {
		if l.Digest == cfg.ComponentDescriptorLayer.Digest {
			continue
		}
		data, err := fetchRaw(ctx, t, l)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		a.Blobs[l.Digest] = Blob{MediaType: l.MediaType, Data: data}
	}
	return a, nil
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
