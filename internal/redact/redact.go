// Package redact keeps values that come from Secrets out of what the
// controller says about a HelmRelease: condition messages, events and the
// errors it logs.
//
// Such values end up in messages without anyone printing them on purpose:
// the API server echoes an invalid field value back ("Unsupported value:
// ..."), and Helm's --set syntax, used for valuesFrom with a targetPath,
// names the piece of a value after a comma when it cannot parse it. The
// values are known while the reconcile composes them, so every message is
// scrubbed of them before it leaves the controller.
package redact

import (
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Placeholder replaces a secret value in a message.
const Placeholder = "[redacted]"

// MinLength is the shortest value that is redacted. Shorter ones ("true",
// "1", "info") are too common to take out of a message without making it
// unreadable, and too short to be a credential worth the name.
const MinLength = 6

// Secrets is a set of values to keep out of messages. The zero value and
// nil redact nothing.
type Secrets struct {
	// words are sorted longest first, so that a value containing another
	// is replaced whole.
	words []string
}

// FromData collects the values of Secret data: each value whole, each
// string or number of it read as YAML (a values file), and each piece of
// it that Helm's --set syntax would split off at , = { } [ ].
func FromData(data ...map[string][]byte) *Secrets {
	seen := map[string]bool{}
	add := func(w string) {
		w = strings.TrimSpace(w)
		if len(w) >= MinLength {
			seen[w] = true
		}
	}
	for _, d := range data {
		for _, raw := range d {
			value := string(raw)
			add(value)
			for _, piece := range strings.FieldsFunc(value, isSetSyntax) {
				add(piece)
			}
			var doc any
			if err := yaml.Unmarshal(raw, &doc); err == nil {
				leaves(doc, add)
			}
		}
	}
	if len(seen) == 0 {
		return nil
	}
	s := &Secrets{words: make([]string, 0, len(seen))}
	for w := range seen {
		s.words = append(s.words, w)
	}
	slices.SortFunc(s.words, func(a, b string) int {
		if d := len(b) - len(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return s
}

func isSetSyntax(r rune) bool {
	return strings.ContainsRune(",={}[]\n", r)
}

// leaves calls add with every scalar of a decoded YAML document, and with
// every line of a multi-line string (a certificate, a key).
func leaves(v any, add func(string)) {
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			leaves(e, add)
		}
	case []any:
		for _, e := range t {
			leaves(e, add)
		}
	case string:
		add(t)
		for line := range strings.SplitSeq(t, "\n") {
			add(line)
		}
	case nil, bool:
	default:
		// Numbers are compared as the text the message would show.
		if b, err := yaml.Marshal(t); err == nil {
			add(string(b))
		}
	}
}

// except drops the words of s that equal one of public; nil when none is
// left.
func (s *Secrets) except(public []string) *Secrets {
	if s == nil {
		return nil
	}
	s.words = slices.DeleteFunc(s.words, func(w string) bool { return slices.Contains(public, w) })
	if len(s.words) == 0 {
		return nil
	}
	return s
}

// String returns msg with every value of s replaced by Placeholder.
func (s *Secrets) String(msg string) string {
	if s == nil {
		return msg
	}
	for _, w := range s.words {
		if strings.Contains(msg, w) {
			msg = strings.ReplaceAll(msg, w, Placeholder)
		}
	}
	return msg
}

// Len is how many values s redacts.
func (s *Secrets) Len() int {
	if s == nil {
		return 0
	}
	return len(s.words)
}
