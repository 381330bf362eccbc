package doclinks

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// repositoryPages are the pages whose links must resolve: the README, the
// CHANGELOG, every page of docs/ and the test harness's README. The vendored
// charts' READMEs are not ours.
var repositoryPages = []string{"*.md", "docs/*.md", "docs/*/*.md", "test/e2e/README.md"}

func TestRepositoryLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	pages := pagesMatching(t, root, repositoryPages)
	// A glob that matches nothing would pass the check vacuously.
	for _, want := range []string{"README.md", "CHANGELOG.md", "docs/README.md", "docs/install.md"} {
		if !slices.Contains(pages, want) {
			t.Fatalf("the pages checked miss %s: %v", want, pages)
		}
	}
	broken, err := Check(root, pages)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
}

func TestCheckReportsWhatDoesNotResolve(t *testing.T) {
	root := t.TempDir()
	write(t, root, "docs/guide.md", "# Guide\n\n## Set up `make tools` (cold)\n\n## Usage\n\n## Usage\n")
	write(t, root, "main.go", "package main\n")
	tests := []struct {
		name   string
		page   string // written at docs/page.md
		broken []string
	}{
		{name: "a page that exists", page: "[g](guide.md)"},
		{name: "a page that does not", page: "[g](gide.md)", broken: []string{"gide.md"}},
		{name: "a directory", page: "[d](../docs)"},
		{name: "a heading's anchor", page: "[s](guide.md#set-up-make-tools-cold)"},
		{name: "an anchor no heading has", page: "[s](guide.md#setup)", broken: []string{"guide.md#setup"}},
		{name: "a repeated heading's anchor", page: "[u](guide.md#usage-1)"},
		{name: "one repeat too many", page: "[u](guide.md#usage-2)", broken: []string{"guide.md#usage-2"}},
		{name: "an anchor on the same page", page: "# Top\n\n[t](#top) [x](#bottom)", broken: []string{"#bottom"}},
		{name: "a line of a source file", page: "[m](../main.go#L1)"},
		{name: "a fragment of a source file that is no line", page: "[m](../main.go#main)", broken: []string{"../main.go#main"}},
		{name: "a link out of the repository", page: "[o](../../elsewhere.md)", broken: []string{"../../elsewhere.md"}},
		{name: "another site", page: "[f](https://fluxcd.io/missing.md) [m](mailto:a@b.c)"},
		{name: "a reference definition", page: "[g][ref]\n\n[ref]: missing.md", broken: []string{"missing.md"}},
		{name: "an image", page: "![chart](bench/n.svg)", broken: []string{"bench/n.svg"}},
		{name: "a link with a title", page: `[g](guide.md "The guide") [x](gone.md "Gone")`, broken: []string{"gone.md"}},
		{name: "inside a code block", page: "```md\n[x](missing.md)\n```\n"},
		{name: "inside inline code", page: "`[x](missing.md)` and ``[y](missing.md)``"},
		{name: "escaped brackets", page: `^\[a-z\]([-a-z]*\[a-z\])?$`},
		{name: "an escaped space", page: "[s](my%20page.md)", broken: []string{"my%20page.md"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			write(t, root, "docs/page.md", tt.page+"\n")
			broken, err := Check(root, []string{"docs/page.md"})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range broken {
				got = append(got, b.Target)
			}
			if strings.Join(got, " ") != strings.Join(tt.broken, " ") {
				t.Errorf("broken links %q, want %q (%v)", got, tt.broken, broken)
			}
		})
	}
}

func TestAnchor(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"Going back to v1.6 (Flux 2.9) with a `kind: OCIRepository` chart template",
			"going-back-to-v16-flux-29-with-a-kind-ocirepository-chart-template"},
		{"Hook cleanup on uninstall", "hook-cleanup-on-uninstall"},
		{"The no-op reconcile under 2 ms at 100, 400 and 2,000 (issue 32, eighth part)",
			"the-no-op-reconcile-under-2-ms-at-100-400-and-2000-issue-32-eighth-part"},
		{"Before – after", "before--after"},
		{"snake_case **bold** name", "snake_case-bold-name"},
		{"See [the guide](guide.md) first", "see-the-guide-first"},
		{"Upstream → ours × 2", "upstream--ours--2"},
		{"Größe", "größe"},
	}
	for _, tt := range tests {
		if got := Anchor(tt.heading); got != tt.want {
			t.Errorf("Anchor(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

func pagesMatching(t *testing.T, root string, patterns []string) []string {
	t.Helper()
	var pages []string
	for _, pattern := range patterns {
		matches, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, filepath.ToSlash(rel))
		}
	}
	sort.Strings(pages)
	return pages
}

func write(t *testing.T, root, name, content string) {
	t.Helper()
	path := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
