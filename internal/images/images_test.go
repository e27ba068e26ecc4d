package images

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/netfleet/netfleet/internal/testbin"
)

// buildProgram builds one of testdata's programs into dir.
func buildProgram(t *testing.T, dir, name string, cgo bool) string {
	t.Helper()
	out := filepath.Join(dir, name)
	cgoEnabled := "CGO_ENABLED=0"
	if cgo {
		cgoEnabled = "CGO_ENABLED=1"
	}
	cmd := testbin.GoBuild("", []string{cgoEnabled}, "-o", out, "./testdata/"+name)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, b)
	}
	return out
}

// layerFiles reads the image's one layer: path -> header, path -> content.
func layerFiles(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	headers, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := "/" + strings.TrimSuffix(h.Name, "/")
		headers[p] = h
		if data[p], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	return headers, data
}

func configOf(t *testing.T, img v1.Image) *v1.ConfigFile {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

func TestStaticImage(t *testing.T) {
	dir := t.TempDir()
	bin := buildProgram(t, dir, "static", false)
	img, err := Build(Operator, bin)
	if err != nil {
		t.Fatal(err)
	}
	headers, data := layerFiles(t, img)
	var paths []string
	for p := range headers {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	want := []string{"/etc", "/etc/group", "/etc/passwd", "/home", "/home/nonroot", "/operator", "/tmp"}
	if !slices.Equal(paths, want) {
		t.Errorf("operator image holds %v, want %v", paths, want)
	}
	if h := headers["/operator"]; h.Mode != 0o755 || h.Uid != 0 {
		t.Errorf("/operator mode %o uid %d, want 755 root", h.Mode, h.Uid)
	}
	if h := headers["/home/nonroot"]; h.Uid != 65532 || h.Gid != 65532 || h.Mode != 0o700 {
		t.Errorf("/home/nonroot owned %d:%d mode %o, want 65532:65532 700", h.Uid, h.Gid, h.Mode)
	}
	if h := headers["/tmp"]; h.Mode != 0o1777 {
		t.Errorf("/tmp mode %o, want 1777", h.Mode)
	}
	if !bytes.Contains(data["/etc/passwd"], []byte("nonroot:x:65532:65532:")) {
		t.Errorf("/etc/passwd lacks the nonroot user:\n%s", data["/etc/passwd"])
	}
	if src, _ := os.ReadFile(bin); !bytes.Equal(data["/operator"], src) {
		t.Error("/operator is not the binary")
	}
	for p, h := range headers {
		if !h.ModTime.Equal(epoch) {
			t.Errorf("%s has time %s, want the epoch", p, h.ModTime)
		}
	}

	cf := configOf(t, img)
	if !slices.Equal(cf.Config.Entrypoint, []string{"/operator"}) || cf.Config.User != "65532:65532" {
		t.Errorf("entrypoint %v user %q", cf.Config.Entrypoint, cf.Config.User)
	}
	if cf.OS != "linux" || cf.Architecture != wantArch(t, bin) || cf.RootFS.Type != "layers" || len(cf.RootFS.DiffIDs) != 1 {
		t.Errorf("config os %s arch %s rootfs %+v", cf.OS, cf.Architecture, cf.RootFS)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s", mt)
	}

	// The same binary gives the same image.
	again, err := Build(Operator, bin)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of one binary: digests %s and %s", d1, d2)
	}
}

func wantArch(t *testing.T, bin string) string {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := goArch(f.Machine)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestStaticSpecRefusesDynamicBinary(t *testing.T) {
	bin := buildProgram(t, t.TempDir(), "enet", true)
	_, err := Build(Operator, bin)
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") || !strings.Contains(err.Error(), "libenet") {
		t.Fatalf("a cgo binary in the operator image: got %v, want an error naming CGO_ENABLED=0 and libenet", err)
	}
}

// TestDynamicImage builds the game server's image around a program that links libenet as the game
// server does: the image holds the binary, the loader and exactly the libraries the loader
// resolves, and, as root, the program runs from the image's files alone as user 65532.
func TestDynamicImage(t *testing.T) {
	dir := t.TempDir()
	bin := buildProgram(t, dir, "enet", true)
	img, err := Build(GameServer, bin)
	if err != nil {
		t.Fatal(err)
	}
	headers, data := layerFiles(t, img)
	cf := configOf(t, img)
	if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/gameserver"}) || cf.Config.User != "65532:65532" {
		t.Errorf("entrypoint %v user %q", cf.Config.Entrypoint, cf.Config.User)
	}
	var ports []string
	for p := range cf.Config.ExposedPorts {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	if !slices.Equal(ports, []string{"7777/udp", "8080/tcp"}) {
		t.Errorf("exposed ports %v", ports)
	}

	// What the loader on this machine loads, per ldd, is what the image holds besides the binary
	// and the accounts: nothing else.
	want := map[string]bool{"/usr/local/bin/gameserver": true, "/etc/passwd": true, "/etc/group": true}
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		t.Fatalf("ldd: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>":
			want[f[2]] = true
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			want[f[0]] = true // the loader
		}
	}
	if !want["/lib/x86_64-linux-gnu/libenet.so.7"] && !want["/usr/lib/x86_64-linux-gnu/libenet.so.7"] {
		t.Fatalf("ldd shows no libenet: %s", out)
	}
	var regular []string
	for p, h := range headers {
		if h.Typeflag == tar.TypeReg {
			regular = append(regular, p)
			if !want[p] {
				t.Errorf("the image holds %s, which the binary does not load", p)
			}
		}
	}
	for p := range want {
		if _, ok := headers[p]; !ok {
			t.Errorf("the image lacks %s, which the binary loads", p)
		}
	}
	t.Logf("game-server image files: %v", regular)

	if os.Getuid() != 0 {
		t.Skip("running the image's files needs chroot, which needs root")
	}
	root := filepath.Join(dir, "rootfs")
	for p, h := range headers {
		target := filepath.Join(root, p)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data[p], fs.FileMode(h.Mode)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(cf.Config.Entrypoint[0])
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	cmd.Dir = "/"
	cmd.Env = cf.Config.Env
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run the image's entry point in its files: %v\n%s", err, got)
	}
	if !strings.HasPrefix(string(got), "enet 1.") || !strings.Contains(string(got), "uid=65532") {
		t.Errorf("the program printed %q", got)
	}
}

func TestWriteArchive(t *testing.T) {
	dir := t.TempDir()
	img, err := Build(Pause, buildProgram(t, dir, "static", false))
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "pause.tar")
	ref := Pause.Ref("3.10.2")
	if err := WriteArchive(archive, ref, img); err != nil {
		t.Fatal(err)
	}
	// Unpack it and read it as an OCI image layout.
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unpacked := filepath.Join(dir, "layout")
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(unpacked, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("%d manifests in the index, want 1", len(m.Manifests))
	}
	d := m.Manifests[0]
	if d.Annotations[annotationContainerdName] != ref || d.Annotations[annotationRefName] != "3.10.2" {
		t.Errorf("annotations %v", d.Annotations)
	}
	want, _ := img.Digest()
	if d.Digest != want {
		t.Errorf("archived digest %s, built %s", d.Digest, want)
	}
	back, err := idx.Image(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(mutate.Extract(back))
	if !bytes.Contains(got, []byte("pause:x:65535:65535:")) {
		t.Error("the archived image's files lack its passwd entry")
	}
	if _, err := os.Stat(archive + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary archive is left: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("the archive's directory holds %d entries, want the program, the archive and the layout", len(entries))
	}
}

func TestBadInputs(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	static := buildProgram(t, dir, "static", false)
	img, err := Build(Pause, static)
	if err != nil {
		t.Fatal(err)
	}
	root := Operator
	root.UID = 0
	relative := Operator
	relative.Path = "operator"
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"not an ELF binary", func() error { _, err := Build(Operator, notELF); return err }(), "not an ELF binary"},
		{"missing binary", func() error { _, err := Build(Operator, filepath.Join(dir, "none")); return err }(), "no such file"},
		{"root user", func() error { _, err := Build(root, static); return err }(), "non-root"},
		{"relative path", func() error { _, err := Build(relative, static); return err }(), "not absolute"},
		{"no repository", Spec{}.Validate(), "no repository"},
		{"ref without tag", WriteArchive(filepath.Join(dir, "x.tar"), "localhost:5000/netfleet/pause", img), "no tag"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, c.err, c.want)
		}
	}
}
