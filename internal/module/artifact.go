package module

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	// stored is the content the artifact was loaded from, as it was (nil when built here).
	stored *stored
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

// packer reads a module's files: only inside root (no ../, no absolute path or symlink leading
// out), each resource bounded by max bytes, and every step checks ctx, so --timeout bounds the
// local work as well.
type packer struct {
	ctx  context.Context
	root string
	max  int64
}

// resolve gives the real path of rel (relative to root), refusing anything outside root.
func (p *packer) resolve(rel string) (string, error) {
	full := rel
	if !filepath.IsAbs(full) {
		full = filepath.Join(p.root, rel)
	}
	if !inside(p.root, filepath.Clean(full)) {
		return "", fmt.Errorf("%s is outside the module directory %s", rel, p.root)
	}
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return "", err
	}
	if !inside(p.root, real) {
		return "", fmt.Errorf("%s is a symlink to %s, outside the module directory %s", rel, real, p.root)
	}
	return real, nil
}

func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// readFile reads a regular file of the module; it also says whether the file is executable.
func (p *packer) readFile(rel string) ([]byte, bool, error) {
	real, err := p.resolve(rel)
	if err != nil {
		return nil, false, err
	}
	info, err := os.Stat(real)
	if err != nil {
		return nil, false, err
	}
	if !info.Mode().IsRegular() {
		return nil, false, fmt.Errorf("%s is not a regular file", rel)
	}
	if info.Size() > p.max {
		return nil, false, fmt.Errorf("%s: %w: %d bytes, the limit is %d (--max-resource-size)", rel, ErrTooLarge, info.Size(), p.max)
	}
	var buf bytes.Buffer
	if err := p.copyFile(&buf, real, info.Size()); err != nil {
		return nil, false, fmt.Errorf("%s: %w", rel, err)
	}
	return buf.Bytes(), info.Mode()&0o111 != 0, nil
}

// copyFile copies exactly size bytes of a file to w, checking ctx between chunks.
func (p *packer) copyFile(w io.Writer, file string, size int64) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	r := io.LimitReader(f, size)
	chunk := make([]byte, 1<<20)
	for {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		n, err := r.Read(chunk)
		if n > 0 {
			if _, werr := w.Write(chunk[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// pack gives a resource's blob: a file as it is (dir false; exec says whether it is
// executable), a directory as a reproducible tar.gz of its files (sorted entries, fixed times
// and owners, mode 0755 for executable files and 0644 for the rest, a gzip header without name
// or time). Symlinks inside the directory are packed as the files they point to when those are
// inside the module directory, and refused otherwise.
func (p *packer) pack(rel string) (data []byte, dir, exec bool, err error) {
	real, err := p.resolve(rel)
	if err != nil {
		return nil, false, false, err
	}
	info, err := os.Stat(real)
	if err != nil {
		return nil, false, false, err
	}
	if !info.IsDir() {
		data, exec, err := p.readFile(rel)
		return data, false, exec, err
	}
	type entry struct {
		name, path string
		size       int64
		exec       bool
	}
	var entries []entry
	var total int64
	err = filepath.WalkDir(real, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := p.ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		name, err := filepath.Rel(real, path)
		if err != nil {
			return err
		}
		target := path
		if d.Type()&fs.ModeSymlink != 0 {
			if target, err = filepath.EvalSymlinks(path); err != nil {
				return err
			}
			if !inside(p.root, target) {
				return fmt.Errorf("%s is a symlink to %s, outside the module directory %s", filepath.Join(rel, name), target, p.root)
			}
		}
		fi, err := os.Stat(target)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s: only regular files (and symlinks to them) can be packed", filepath.Join(rel, name))
		}
		total += fi.Size()
		if total > p.max {
			return fmt.Errorf("%s: %w: over %d bytes, the limit (--max-resource-size)", rel, ErrTooLarge, p.max)
		}
		entries = append(entries, entry{name: filepath.ToSlash(name), path: target, size: fi.Size(), exec: fi.Mode()&0o111 != 0})
		return nil
	})
	if err != nil {
		return nil, true, false, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	// The zero header (no name, no ModTime) and a fixed level keep the bytes reproducible.
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, true, false, err
	}
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		mode := int64(0o644)
		if e.exec {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Size: e.size, Mode: mode, ModTime: epoch}); err != nil {
			return nil, true, false, err
		}
		if err := p.copyFile(tw, e.path, e.size); err != nil {
			return nil, true, false, fmt.Errorf("%s: %w", filepath.Join(rel, e.name), err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, true, false, err
	}
	if err := zw.Close(); err != nil {
		return nil, true, false, err
	}
	return buf.Bytes(), true, false, nil
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
