package postrender

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
)

func TestInlineAliases(t *testing.T) {
	cases := []struct {
		name      string
		in        string
		unchanged bool
		wantErr   string
		// want maps object name to a value of data.a it must have.
		want map[string]string
	}{
		{
			name:      "no aliases: untouched",
			in:        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\ndata:\n  a: \"1\"\n",
			unchanged: true,
		},
		{
			name:      "aliases within a document: untouched",
			in:        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n  labels: &l\n    x: y\n  annotations: *l\n",
			unchanged: true,
		},
		{
			// What Helm 4 hands a post renderer for a List whose second item
			// aliases the first.
			name: "alias across documents",
			in: `apiVersion: v1
kind: ConfigMap
metadata:
  name: one
  annotations:
    postrenderer.helm.sh/postrender-filename: demo/templates/list.yaml
data: &shared
  a: "1"
  script: |
    echo start
    ---
    echo end
---
# a comment first
apiVersion: v1
kind: ConfigMap
metadata:
  name: two
  annotations:
    postrenderer.helm.sh/postrender-filename: demo/templates/list.yaml
data: *shared
`,
			want: map[string]string{"one": "1", "two": "1"},
		},
		{
			name:    "other broken YAML is reported",
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n",
			wantErr: "parsing the rendered manifests",
		},
		{
			name:    "an anchor that exists nowhere is reported",
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\ndata: *missing\n",
			wantErr: "aliases across documents",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := bytes.NewBufferString(tc.in)
			out, err := inlineAliases(in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.unchanged {
				if out != in || out.String() != tc.in {
					t.Fatalf("input rewritten:\n%s", out)
				}
				return
			}
			nodes, err := kio.ParseAll(out.String())
			if err != nil {
				t.Fatalf("output does not parse: %v\n%s", err, out)
			}
			if len(nodes) != len(tc.want) {
				t.Fatalf("%d documents, want %d:\n%s", len(nodes), len(tc.want), out)
			}
			for _, n := range nodes {
				data := n.GetDataMap()
				if data["a"] != tc.want[n.GetName()] {
					t.Errorf("%s: data.a = %q, want %q", n.GetName(), data["a"], tc.want[n.GetName()])
				}
				if data["script"] != "echo start\n---\necho end\n" {
					t.Errorf("%s: block scalar changed: %q", n.GetName(), data["script"])
				}
				if n.GetAnnotations()["postrenderer.helm.sh/postrender-filename"] != "demo/templates/list.yaml" {
					t.Errorf("%s: Helm's filename annotation lost", n.GetName())
				}
			}
		})
	}
}
