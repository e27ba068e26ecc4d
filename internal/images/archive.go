package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Annotations of an image in an OCI layout's index: containerd names an imported image by the
// first, other tools by the second (the tag), as BuildKit writes them.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// WriteArchive writes img as an OCI image archive at path: an OCI image layout, its index naming
// the image ref (e.g. ghcr.io/netfleet/operator:0.1.0), in a tar. `ctr images import` loads it
// under that name. The file is replaced whole: a reader never sees half of it.
func WriteArchive(path, ref string, img v1.Image) (err error) {
	_, tag, ok := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	if !ok || tag == "" {
		return fmt.Errorf("image reference %q has no tag", ref)
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".oci-layout-")
	if err != nil {
		return fmt.Errorf("archive %s: %w", path, err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("archive %s: layout: %w", path, err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		annotationContainerdName: ref,
		annotationRefName:        tag,
	})); err != nil {
		return fmt.Errorf("archive %s: write %s: %w", path, ref, err)
	}

	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("archive %s: %w", path, err)
	}
	tw := tar.NewWriter(f)
	err = tw.AddFS(os.DirFS(dir))
	err = errors.Join(err, tw.Close(), f.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("archive %s: %w", path, err)
	}
	return nil
}
