package preview

import (
	"encoding/json"
	"reflect"
	"sort"

	"github.com/afterhooks/helm-controller/internal/redact"
)

// changedKeys lists the dotted keys whose values differ between from and
// to (added, removed or changed), without the values; a key that holds a
// value read from a Secret is redacted as the controller redacts its
// messages.
func changedKeys(from, to map[string]any, secrets *redact.Secrets) []string {
	var out []string
	walkChanges("", normalize(from), normalize(to), func(path string) { out = append(out, secrets.String(path)) })
	sort.Strings(out)
	return out
}

func walkChanges(prefix string, a, b map[string]any, report func(string)) {
	seen := map[string]bool{}
	visit := func(k string) {
		if seen[k] {
			return
		}
		seen[k] = true
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		am, aok := a[k].(map[string]any)
		bm, bok := b[k].(map[string]any)
		switch {
		case aok && bok:
			walkChanges(path, am, bm, report)
		case !reflect.DeepEqual(a[k], b[k]):
			report(path)
		}
	}
	for k := range a {
		visit(k)
	}
	for k := range b {
		visit(k)
	}
}

// normalize gives values decoded from JSON (a stored release) and from
// YAML (the HelmRelease) the same number types, so that only real changes
// differ.
func normalize(values map[string]any) map[string]any {
	b, err := json.Marshal(values)
	if err != nil {
		return values
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil {
		return values
	}
	return out
}
