package images

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is the time of every file and of the image itself, so that a build is reproducible.
var epoch = time.Unix(0, 0).UTC()

// File is one entry of an image's layer.
type File struct {
	// Path is the absolute path in the image.
	Path string
	// Mode holds the permission bits and fs.ModeDir for a directory (fs.ModeSticky too).
	Mode fs.FileMode
	// UID and GID own the entry.
	UID, GID int
	// Source is the file on this machine a regular file is copied from; Data is the content of
	// one that is generated instead.
	Source string
	Data   []byte
}

// Contents lists what the image of spec around the binary at binary holds, parent directories
// first: the binary at spec.Path; for a dynamic binary, its loader at the path it names and the
// shared libraries it links, each at the path the loader finds it on this machine; /etc/passwd
// and /etc/group with root and spec's user; /tmp; and the user's home when it has one.
func Contents(spec Spec, binary string) ([]File, error) {
	files, _, err := contents(spec, binary)
	return files, err
}

func contents(spec Spec, binary string) ([]File, *linkage, error) {
	if err := spec.Validate(); err != nil {
		return nil, nil, err
	}
	link, err := readLinkage(binary)
	if err != nil {
		return nil, nil, fmt.Errorf("image %s: %w", spec.Repository, err)
	}
	if spec.Static && link.interp != "" {
		return nil, nil, fmt.Errorf("image %s must hold a static binary, and %s is dynamic (loader %s, libraries %v): build it with CGO_ENABLED=0",
			spec.Repository, binary, link.interp, link.libraries)
	}
	files := map[string]File{}
	add := func(f File) { files[f.Path] = f }
	add(File{Path: spec.Path, Mode: 0o755, Source: binary})
	if link.interp != "" {
		if !path.IsAbs(link.interp) {
			return nil, nil, fmt.Errorf("image %s: the loader %q of %s is not an absolute path", spec.Repository, link.interp, binary)
		}
		add(File{Path: link.interp, Mode: 0o755, Source: link.interp})
		for _, lib := range link.libraries {
			add(File{Path: lib, Mode: 0o644, Source: lib})
		}
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", spec.UserName, spec.UID, spec.GID, spec.UserName, spec.Home)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", spec.UserName, spec.GID)
	add(File{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)})
	add(File{Path: "/etc/group", Mode: 0o644, Data: []byte(group)})
	add(File{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777})
	if spec.Home != "/nonexistent" {
		add(File{Path: spec.Home, Mode: fs.ModeDir | 0o700, UID: spec.UID, GID: spec.GID})
	}
	// Every parent directory, root-owned.
	for p := range files {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := files[d]; !ok {
				add(File{Path: d, Mode: fs.ModeDir | 0o755})
			}
		}
	}
	out := make([]File, 0, len(files))
	for _, f := range files {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, link, nil
}

// Build returns the image of spec around the binary at binary (see Contents), an OCI image for
// the binary's architecture whose entry point is the binary, run as spec's user.
func Build(spec Spec, binary string) (v1.Image, error) {
	files, link, err := contents(spec, binary)
	if err != nil {
		return nil, err
	}
	arch, err := goArch(link.machine)
	if err != nil {
		return nil, fmt.Errorf("image %s: %s: %w", spec.Repository, binary, err)
	}
	layerTar, err := writeLayer(files)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Repository, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image %s: layer: %w", spec.Repository, err)
	}
	cfg := v1.Config{
		Entrypoint: []string{spec.Path},
		User:       spec.User(),
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
	}
	if len(spec.ExposedPorts) > 0 {
		cfg.ExposedPorts = map[string]struct{}{}
		for _, p := range spec.ExposedPorts {
			cfg.ExposedPorts[p] = struct{}{}
		}
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config:       cfg,
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", spec.Repository, err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "netfleet images: " + filepath.Base(binary)},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Repository, err)
	}
	return img, nil
}

func goArch(m elf.Machine) (string, error) {
	switch m {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", fmt.Errorf("machine %s has no image architecture here", m)
}

// writeLayer writes the layer's tar stream: every entry with the epoch as its time, so equal
// inputs give equal bytes.
func writeLayer(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    strings.TrimPrefix(f.Path, "/"),
			Mode:    int64(f.Mode.Perm()),
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		if f.Mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		var data []byte
		switch {
		case f.Mode.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case f.Source != "":
			b, err := os.ReadFile(f.Source) // follows symlinks: the image gets the file itself
			if err != nil {
				return nil, fmt.Errorf("read %s for %s: %w", f.Source, f.Path, err)
			}
			data = b
		default:
			data = f.Data
		}
		if !f.Mode.IsDir() {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.Path, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}
