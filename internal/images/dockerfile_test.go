package images

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stage is what the Dockerfile says about one of its stages.
type stage struct {
	entrypoint []string
	user       string
	expose     []string
	copied     []string // destinations of COPY --from
}

// parseDockerfile reads the instructions netfleet's images share with the Dockerfile, by stage
// name.
func parseDockerfile(t *testing.T, path string) map[string]*stage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Join continuation lines; drop comments.
	var lines []string
	var cur strings.Builder
	for _, l := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		if s := strings.TrimSpace(cur.String()); s != "" {
			lines = append(lines, s)
		}
		cur.Reset()
	}
	stages := map[string]*stage{}
	var st *stage
	for _, l := range lines {
		instr, args, _ := strings.Cut(l, " ")
		fields := strings.Fields(args)
		switch strings.ToUpper(instr) {
		case "FROM":
			st = &stage{}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				stages[fields[2]] = st
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(args), &st.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s is not in exec (JSON) form: %v", args, err)
			}
		case "USER":
			st.user = args
		case "EXPOSE":
			st.expose = append(st.expose, fields...)
		case "COPY":
			if len(fields) > 0 && strings.HasPrefix(fields[0], "--from=") {
				st.copied = append(st.copied, fields[len(fields)-1])
			}
		}
	}
	return stages
}

// TestDockerfileAgrees holds the Dockerfile, which users with Docker build, to the images this
// package builds: the same entry point (the binary copied there), user and ports.
func TestDockerfileAgrees(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join("..", "..", "Dockerfile"))
	for name, spec := range map[string]Spec{"operator": Operator, "gameserver": GameServer} {
		st, ok := stages[name]
		if !ok {
			t.Errorf("the Dockerfile has no stage %q", name)
			continue
		}
		if !slices.Equal(st.entrypoint, []string{spec.Path}) {
			t.Errorf("stage %s: ENTRYPOINT %q, the image's %q", name, st.entrypoint, spec.Path)
		}
		if !slices.Equal(st.copied, []string{spec.Path}) {
			t.Errorf("stage %s copies its binary to %q, the image holds it at %s", name, st.copied, spec.Path)
		}
		if st.user != spec.User() {
			t.Errorf("stage %s: USER %q, the image's %q", name, st.user, spec.User())
		}
		expose, want := slices.Sorted(slices.Values(st.expose)), slices.Sorted(slices.Values(spec.ExposedPorts))
		if !slices.Equal(expose, want) {
			t.Errorf("stage %s: EXPOSE %q, the image's %q", name, expose, want)
		}
	}
}
