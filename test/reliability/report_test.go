package reliability

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// row is one line of the table: one kind of trial, run Runs times.
type row struct {
	// Section groups rows: "Faults", "Load", "Shards", "Bad input".
	Section string
	// Case says what was done, e.g. "install, afterHooks, post hooks:
	// SIGKILL".
	Case string
	Runs int
	// Failures lists, per failed run, the invariants it broke and how.
	Failures []string
	// Known lists documented departures from an invariant, one per run
	// that showed one; they do not fail the row.
	Known []string
	// Note carries figures: durations, peak memory, the outcome seen.
	Note string
}

func (r row) passed() int { return r.Runs - len(r.Failures) }

// table collects rows from tests running in parallel.
type table struct {
	mu   sync.Mutex
	rows []row
}

func (t *table) add(r row) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows = append(t.rows, r)
}

// sectionOrder is the order sections appear in.
var sectionOrder = []string{"Faults", "Load", "Shards", "Bad input"}

// markdown renders the table with the machine and the date.
func (t *table) markdown(full bool) string {
	t.mu.Lock()
	rows := slices.Clone(t.rows)
	t.mu.Unlock()
	slices.SortStableFunc(rows, func(a, b row) int {
		if d := slices.Index(sectionOrder, a.Section) - slices.Index(sectionOrder, b.Section); d != 0 {
			return d
		}
		return strings.Compare(a.Case, b.Case)
	})
	var b strings.Builder
	suite := "short (make test)"
	if full {
		suite = "full (make reliability)"
	}
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "Suite: %s. Run %s on %s (%s/%s, %d CPUs, %s).\n",
		suite, time.Now().UTC().Format("2006-01-02 15:04 MST"), host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	runs, passed := 0, 0
	for _, section := range sectionOrder {
		fmt.Fprintf(&b, "\n#### %s\n\n| case | runs | passed | invariants broken | figures |\n|---|---|---|---|---|\n", section)
		for _, r := range rows {
			if r.Section != section {
				continue
			}
			runs += r.Runs
			passed += r.passed()
			broken := "none"
			if len(r.Failures) > 0 {
				broken = markdownCell(strings.Join(r.Failures, "; "))
			}
			broken += knownNote(r.Known)
			fmt.Fprintf(&b, "| %s | %d | %d | %s | %s |\n", r.Case, r.Runs, r.passed(), broken, markdownCell(r.Note))
		}
	}
	fmt.Fprintf(&b, "\nTotal: %d runs, %d passed.\n", runs, passed)
	return b.String()
}

// markdownCell escapes what Markdown would read in a table cell of free
// text: a '|' ends the cell, and brackets followed by parentheses (as in
// Helm's release-name pattern, quoted by its error) would make a link.
var markdownCell = strings.NewReplacer("|", `\|`, "[", `\[`, "]", `\]`).Replace

// failedRows repeats each row with a failed run, section and case first,
// with its broken invariants; empty when every run passed.
func (t *table) failedRows() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for _, r := range t.rows {
		if len(r.Failures) == 0 {
			continue
		}
		fmt.Fprintf(&b, "FAILED %s / %s: %d of %d runs: %s\n", r.Section, r.Case, len(r.Failures), r.Runs, strings.Join(r.Failures, "; "))
	}
	return b.String()
}

const (
	sectionBegin = "<!-- reliability table: begin (written by `make reliability`) -->"
	sectionEnd   = "<!-- reliability table: end -->"
)

// writeSection replaces the text between the table markers in path, or
// appends the markers and the table when the file has none.
func writeSection(path, text string) error {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := string(data)
	block := sectionBegin + "\n" + text + sectionEnd
	begin, end := strings.Index(doc, sectionBegin), strings.Index(doc, sectionEnd)
	if begin >= 0 && end > begin {
		doc = doc[:begin] + block + doc[end+len(sectionEnd):]
	} else {
		doc = strings.TrimRight(doc, "\n") + "\n\n" + block + "\n"
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// knownNote summarises documented departures: each text once, with how
// many runs showed it.
func knownNote(known []string) string {
	if len(known) == 0 {
		return ""
	}
	count := map[string]int{}
	var order []string
	for _, k := range known {
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, count[k]))
	}
	return "; known: " + strings.Join(parts, "; ")
}
