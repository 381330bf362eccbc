package preview

import (
	"slices"
	"strings"
	"testing"

	"github.com/afterhooks/helm-controller/internal/redact"
)

func TestCompareManifests(t *testing.T) {
	cm := func(name, data string, annotations ...string) string {
		s := "---\n# Source: web/templates/" + name + ".yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
		if len(annotations) > 0 {
			s += "  annotations:\n    " + annotations[0] + "\n"
		}
		return s + "data:\n  k: " + data + "\n"
	}
	tests := []struct {
		name, from, to                     string
		create, update, same, delete, keep []string
		fields                             []string
	}{
		{name: "install", to: cm("a", "x") + cm("b", "y"), create: []string{"ConfigMap/a", "ConfigMap/b"}},
		{name: "unchanged", from: cm("a", "x"), to: cm("a", "x"), same: []string{"ConfigMap/a"}},
		{name: "update names the field", from: cm("a", "x"), to: cm("a", "z"), update: []string{"ConfigMap/a"}, fields: []string{"data.k"}},
		{name: "dropped objects go unless kept",
			from: cm("a", "x") + cm("b", "x") + cm("c", "x", `helm.sh/resource-policy: keep`), to: cm("a", "x"),
			same: []string{"ConfigMap/a"}, delete: []string{"ConfigMap/b"}, keep: []string{"ConfigMap/c"}},
		{name: "uninstall", from: cm("a", "x") + cm("c", "x", `helm.sh/resource-policy: keep`),
			delete: []string{"ConfigMap/a"}, keep: []string{"ConfigMap/c"}},
	}
	ids := func(objs []Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.String())
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := compareManifests(tt.from, tt.to)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{
				{"create", ids(got.Create), tt.create}, {"update", ids(got.Update), tt.update},
				{"unchanged", ids(got.Unchanged), tt.same}, {"delete", ids(got.Delete), tt.delete},
				{"keep", ids(got.Keep), tt.keep},
			} {
				if !slices.Equal(c.got, c.want) {
					t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
				}
			}
			if tt.fields != nil && !slices.Equal(got.Update[0].Fields, tt.fields) {
				t.Errorf("fields %q, want %q", got.Update[0].Fields, tt.fields)
			}
		})
	}
}

// A Job with ttlSecondsAfterFinished is marked, created or deleted, so
// nobody takes its absence after the action for a plan gone wrong; a Job
// without one, or a kind that only shares the field's name, is not.
func TestCompareManifestsMarksJobsThatDeleteThemselves(t *testing.T) {
	job := func(name, apiVersion, kind, spec string) string {
		return "---\napiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata:\n  name: " + name + "\nspec:\n" + spec
	}
	from := job("old-ttl", "batch/v1", "Job", "  ttlSecondsAfterFinished: 0\n")
	to := job("ttl", "batch/v1", "Job", "  ttlSecondsAfterFinished: 30\n") +
		job("plain", "batch/v1", "Job", "  backoffLimit: 0\n") +
		job("custom", "example.com/v1", "Job", "  ttlSecondsAfterFinished: 0\n")
	got, err := compareManifests(from, to)
	if err != nil {
		t.Fatal(err)
	}
	marked := map[string]bool{}
	for _, o := range append(got.Create, got.Delete...) {
		marked[o.Name] = o.SelfDeleting
	}
	want := map[string]bool{"old-ttl": true, "ttl": true, "plain": false, "custom": false}
	for name, w := range want {
		if marked[name] != w {
			t.Errorf("%s: selfDeleting %v, want %v", name, marked[name], w)
		}
	}
}

func TestChangedKeys(t *testing.T) {
	secrets := redact.FromData(map[string][]byte{"password": []byte("hunter2-secret")})
	tests := []struct {
		name     string
		from, to map[string]any
		want     []string
	}{
		{"none", map[string]any{"a": 1}, map[string]any{"a": 1}, nil},
		{"int from YAML equals float from JSON", map[string]any{"a": float64(1)}, map[string]any{"a": 1}, nil},
		{"changed, added, removed, nested",
			map[string]any{"a": 1, "gone": true, "n": map[string]any{"x": "1", "y": "2"}},
			map[string]any{"a": 2, "new": true, "n": map[string]any{"x": "1", "y": "3"}},
			[]string{"a", "gone", "n.y", "new"}},
		{"a key that is a secret value is redacted",
			map[string]any{}, map[string]any{"hunter2-secret": "x"}, []string{redact.Placeholder}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := changedKeys(tt.from, tt.to, secrets); !slices.Equal(got, tt.want) {
				t.Errorf("%q, want %q", got, tt.want)
			}
		})
	}
}

// Colour only when asked: the command asks on a terminal.
func TestWriteTextColour(t *testing.T) {
	pv := &Preview{Release: "apps/web", Step: "upgrade", Actions: []Action{{Verb: "upgrade",
		Objects: Objects{Create: []Object{{Kind: "ConfigMap", Name: "a"}}}}}}
	for _, color := range []bool{false, true} {
		var b strings.Builder
		if err := WriteText(&b, pv, color); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "\x1b["); got != color {
			t.Errorf("colour %t: escape codes in output: %t\n%s", color, got, b.String())
		}
	}
}
