package module

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Artifact is a component version as OCI content: the descriptor and the local blobs its
// resources refer to. Its manifest is a pure function of these (no timestamps), so the same
// module always gives the same digest.
type Artifact struct {
	Descriptor *ComponentDescriptor
	// Blobs are the local blobs by digest, with their media types.
	Blobs map[digest.Digest]Blob
}

// Blob is a local blob's content.
type Blob struct {
	MediaType string
	Data      []byte
}

// Packed is an artifact's OCI content: the manifest and every blob it names.
type Packed struct {
	Manifest     ocispec.Descriptor
	Config       ocispec.Descriptor
	ManifestJSON []byte
	// Contents holds every blob (config, descriptor layer, local blobs) by digest.
	Contents map[digest.Digest][]byte
	// Layers are the manifest's layers in order (the descriptor layer first).
	Layers []ocispec.Descriptor
}

// componentConfig is the OCI config of a component version.
type componentConfig struct {
	ComponentDescriptorLayer ocispec.Descriptor `json:"componentDescriptorLayer"`
}

// epoch is the modification time of every tar entry: fixed, so tars are reproducible.
var epoch = time.Unix(0, 0).UTC()

// Pack lays the artifact out as OCI content: a tar holding component-descriptor.yaml as the first
// layer, the local blobs after it in resource order, and a config naming the descriptor layer.
func (a *Artifact) Pack() (*Packed, error) {
	cdYAML, err := a.Descriptor.MarshalYAML()
	if err != nil {
		return nil, fmt.Errorf("marshal component descriptor: %w", err)
	}
	cdTar, err := tarFiles([]tarFile{{name: DescriptorFileName, data: cdYAML}})
	if err != nil {
		return nil, fmt.Errorf("tar component descriptor: %w", err)
	}
	p := &Packed{Contents: map[digest.Digest][]byte{}}
	cdLayer := p.add(MediaTypeDescriptorLayer, cdTar)
	p.Layers = append(p.Layers, cdLayer)
	for _, r := range a.Descriptor.Component.Resources {
		if r.Access.Type != AccessTypeLocalBlob {
			continue
		}
		d := digest.Digest(r.Access.LocalReference)
		if _, done := p.Contents[d]; done {
			continue
		}
		b, ok := a.Blobs[d]
		if !ok {
			return nil, fmt.Errorf("resource %s: local blob %s missing", r.Name, d)
		}
		p.Layers = append(p.Layers, p.add(b.MediaType, b.Data))
	}
	cfgJSON, err := json.Marshal(componentConfig{ComponentDescriptorLayer: cdLayer})
	if err != nil {
		return nil, err
	}
	p.Config = p.add(MediaTypeComponentConfig, cfgJSON)
	manifest := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    p.Config,
		Layers:    p.Layers,
	}
	p.ManifestJSON, err = json.Marshal(manifest)
	if err != nil {
		return nil, err
	}
	p.Manifest = ocispec.Descriptor{
		MediaType: ocispec.MediaTypeImageManifest,
		Digest:    digest.FromBytes(p.ManifestJSON),
		Size:      int64(len(p.ManifestJSON)),
	}
	return p, nil
}

func (p *Packed) add(mediaType string, data []byte) ocispec.Descriptor {
	d := digest.FromBytes(data)
	p.Contents[d] = data
	return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}
}

// Size is the total size of the artifact's content (manifest and every blob) in bytes.
func (p *Packed) Size() int64 {
	n := int64(len(p.ManifestJSON))
	for _, b := range p.Contents {
		n += int64(len(b))
	}
	return n
}

type tarFile struct {
	name string
	data []byte
}

// tarFiles writes a reproducible tar: entries sorted by name, fixed times, owners and modes.
func tarFiles(files []tarFile) ([]byte, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.name,
			Size:     int64(len(f.data)),
			Mode:     0o644,
			ModTime:  epoch,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarGzipPath packs a file or a directory tree (regular files only, symlinks refused) into a
// reproducible tar.gz: sorted entries, fixed times and modes, a gzip header without name or time.
func tarGzipPath(root string) ([]byte, error) {
	info, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	var files []tarFile
	if !info.IsDir() {
		data, err := os.ReadFile(root)
		if err != nil {
			return nil, err
		}
		files = append(files, tarFile{name: filepath.Base(root), data: data})
	} else {
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s: only regular files can be packed", p)
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files = append(files, tarFile{name: filepath.ToSlash(rel), data: data})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	tarData, err := tarFiles(files)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	// The zero header (no name, no ModTime) and a fixed level keep the bytes reproducible.
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tarData); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// untarFile returns the named file of a tar.
func untarFile(data []byte, name string) ([]byte, error) {
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%s not found in tar: %w", name, err)
		}
		if hdr.Name == name {
			var out bytes.Buffer
			if _, err := out.ReadFrom(tr); err != nil {
				return nil, err
			}
			return out.Bytes(), nil
		}
	}
}
