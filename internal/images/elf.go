package images

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// linkage is what a binary needs from the machine to start: its program interpreter (the dynamic
// loader, "" for a static binary) and the shared libraries in the closure of its DT_NEEDED
// entries, each at the path where the loader finds it.
type linkage struct {
	machine   elf.Machine
	class     elf.Class
	interp    string
	libraries []string
}

// multiarch names the Debian multiarch directory of each machine netfleet images are built for.
var multiarch = map[elf.Machine]string{
	elf.EM_X86_64:  "x86_64-linux-gnu",
	elf.EM_AARCH64: "aarch64-linux-gnu",
}

// searchDirs is where the loader looks for a library that no run path names, in its order: the
// multiarch directories (Debian's glibc searches them without an ld.so.cache, so the image needs
// none), then the generic ones.
func searchDirs(m elf.Machine) []string {
	var dirs []string
	if t, ok := multiarch[m]; ok {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// readLinkage reads what the ELF binary at path links.
func readLinkage(path string) (*linkage, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s is not an ELF binary: %w", path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return nil, fmt.Errorf("%s is an ELF %s, not an executable", path, f.Type)
	}
	l := &linkage{machine: f.Machine, class: f.Class}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("%s: read its interpreter: %w", path, err)
		}
		l.interp = strings.TrimRight(string(b), "\x00")
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("%s: read its libraries: %w", path, err)
	}
	if len(needed) > 0 && l.interp == "" {
		return nil, fmt.Errorf("%s needs %v but has no interpreter", path, needed)
	}
	if l.interp == "" {
		return l, nil
	}
	if _, ok := multiarch[f.Machine]; !ok {
		return nil, fmt.Errorf("%s: machine %s is not one images knows the library directories of", path, f.Machine)
	}

	// Breadth first over DT_NEEDED, as the loader loads them; each soname once.
	seen := map[string]bool{filepath.Base(l.interp): true} // the loader is loaded already
	type pending struct {
		soname string
		runDir []string
	}
	queue := []pending{}
	runDirs, err := runPath(f, path)
	if err != nil {
		return nil, err
	}
	for _, n := range needed {
		queue = append(queue, pending{n, runDirs})
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p.soname] {
			continue
		}
		seen[p.soname] = true
		found, deps, dirs, err := l.find(p.soname, p.runDir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		l.libraries = append(l.libraries, found)
		for _, d := range deps {
			queue = append(queue, pending{d, dirs})
		}
	}
	return l, nil
}

// runPath returns an object's DT_RUNPATH (else DT_RPATH) directories.
func runPath(f *elf.File, path string) ([]string, error) {
	var dirs []string
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, err := f.DynString(tag)
		if err != nil {
			return nil, fmt.Errorf("%s: read %s: %w", path, tag, err)
		}
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				if strings.Contains(d, "$") {
					return nil, fmt.Errorf("%s: run path %q uses a token ($ORIGIN, ...) that images does not expand", path, v)
				}
				if d != "" {
					dirs = append(dirs, d)
				}
			}
		}
		if len(dirs) > 0 {
			break
		}
	}
	return dirs, nil
}

// find returns the path of soname that the loader would load for this binary (the first match of
// its machine and class in the run path, then the search directories), with that library's own
// DT_NEEDED entries and run path.
func (l *linkage) find(soname string, runDirs []string) (string, []string, []string, error) {
	if strings.Contains(soname, "/") {
		return "", nil, nil, fmt.Errorf("library %q is named by path, which images does not follow", soname)
	}
	dirs := append(append([]string{}, runDirs...), searchDirs(l.machine)...)
	for _, d := range dirs {
		candidate := filepath.Join(d, soname)
		f, err := elf.Open(candidate)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", nil, nil, fmt.Errorf("library %s: %w", candidate, err)
		}
		if f.Machine != l.machine || f.Class != l.class {
			f.Close()
			continue // another architecture's copy, as the loader skips it
		}
		deps, err := f.ImportedLibraries()
		if err == nil {
			var rp []string
			rp, err = runPath(f, candidate)
			f.Close()
			if err != nil {
				return "", nil, nil, err
			}
			return candidate, deps, rp, nil
		}
		f.Close()
		return "", nil, nil, fmt.Errorf("library %s: %w", candidate, err)
	}
	return "", nil, nil, fmt.Errorf("library %s not found in %s", soname, strings.Join(dirs, ", "))
}
