package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// notAvailable fills a cell whose value cannot be measured.
const notAvailable = "n/a"

// Table is a header and rows of text cells, ready to print.
type Table struct {
	Header []string
	Rows   [][]string
}

// ResultTable has one row per run.
func ResultTable(rows []Row) Table {
	t := Table{Header: []string{
		"controller", "N", "time to all Ready (s)", "controller CPU (s)", "CPU per release (ms)",
		"peak RSS (MiB)", "no-op CPU per reconcile (ms)", "downloads install/no-op",
		"API requests per release", "controller requests per release",
		"restart: all reconciled (s)", "restart CPU (s)", "new revisions",
	}}
	for _, r := range rows {
		n := float64(r.Releases)
		t.Rows = append(t.Rows, []string{
			controllerLabel(r.Controller, r.Shards),
			strconv.Itoa(r.Releases),
			fmt.Sprintf("%.1f", r.TimeToReady.Seconds()),
			fmt.Sprintf("%.1f", r.InstallCPU.Seconds()),
			fmt.Sprintf("%.0f", milliseconds(r.InstallCPU)/n),
			fmt.Sprintf("%.0f", float64(r.PeakRSSBytes)/(1<<20)),
			fmt.Sprintf("%.1f", milliseconds(r.NoopCPU)/n),
			downloadsCell(r),
			fmt.Sprintf("%.0f", r.APIRequests/n),
			fmt.Sprintf("%.1f", r.ControllerRequests/n),
			restartCell(r, fmt.Sprintf("%.1f", r.RestartTime.Seconds())),
			restartCell(r, fmt.Sprintf("%.1f", r.RestartCPU.Seconds())),
			restartCell(r, strconv.Itoa(r.NewRevisions)),
		})
	}
	return t
}

// controllerLabel names a run's controller, with its shards if it had any.
func controllerLabel(controller string, shards int) string {
	if shards == 0 {
		return controller
	}
	return fmt.Sprintf("%s, %d shards", controller, shards)
}

// restartCell is value, or n/a for rows saved before runs had a restart
// phase.
func restartCell(r Row, value string) string {
	if r.RestartTime == 0 {
		return notAvailable
	}
	return value
}

func milliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func downloadsCell(r Row) string {
	if !r.DownloadsCounted {
		return notAvailable
	}
	return fmt.Sprintf("%.0f/%.0f", r.InstallDownloads, r.NoopDownloads)
}

// RatioTable compares ours with upstream for every fleet size both ran
// at; it has no rows when there is no such pair.
func RatioTable(rows []Row) Table {
	t := Table{Header: []string{"N", "time ours/upstream", "CPU ours/upstream", "peak RSS ours/upstream", "no-op CPU ours/upstream"}}
	for _, pair := range pairs(rows) {
		ours, upstream := pair[0], pair[1]
		t.Rows = append(t.Rows, []string{
			strconv.Itoa(ours.Releases),
			ratio(ours.TimeToReady.Seconds(), upstream.TimeToReady.Seconds()),
			ratio(ours.InstallCPU.Seconds(), upstream.InstallCPU.Seconds()),
			ratio(float64(ours.PeakRSSBytes), float64(upstream.PeakRSSBytes)),
			ratio(ours.NoopCPU.Seconds(), upstream.NoopCPU.Seconds()),
		})
	}
	return t
}

// pairs returns [ours, upstream] for each fleet size both ran at, in the
// order the sizes first appear.
func pairs(rows []Row) [][2]Row {
	var result [][2]Row
	seen := map[int]bool{}
	for _, r := range rows {
		if seen[r.Releases] {
			continue
		}
		seen[r.Releases] = true
		ours, oursFound := find(rows, Ours, r.Releases)
		upstream, upstreamFound := find(rows, Upstream, r.Releases)
		if oursFound && upstreamFound {
			result = append(result, [2]Row{ours, upstream})
		}
	}
	return result
}

func find(rows []Row, controller string, releases int) (Row, bool) {
	for _, r := range rows {
		if r.Controller == controller && r.Releases == releases && r.Shards == 0 {
			return r, true
		}
	}
	return Row{}, false
}

func ratio(ours, upstream float64) string {
	if upstream == 0 {
		return notAvailable
	}
	return fmt.Sprintf("%.2f", ours/upstream)
}

// WriteText prints the results, and the ratios when there are any, as
// aligned plain-text tables.
func WriteText(w io.Writer, rows []Row) error {
	for i, t := range tablesOf(rows) {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if err := t.writeText(w); err != nil {
			return err
		}
	}
	return nil
}

// WriteMarkdown prints the same tables as GitHub-flavoured Markdown.
func WriteMarkdown(w io.Writer, rows []Row) error {
	for i, t := range tablesOf(rows) {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(w, t.markdown()); err != nil {
			return err
		}
	}
	return nil
}

func tablesOf(rows []Row) []Table {
	tables := []Table{ResultTable(rows)}
	if ratios := RatioTable(rows); len(ratios.Rows) > 0 {
		tables = append(tables, ratios)
	}
	if scaling := ScalingTable(rows); len(scaling.Rows) > 0 {
		tables = append(tables, scaling)
	}
	if steady := SteadyTable(rows); len(steady.Rows) > 0 {
		tables = append(tables, steady)
	}
	return tables
}

func (t Table) writeText(w io.Writer) error {
	// Aligned in memory first: a strings.Builder cannot fail, so the only
	// error left is the single write to w.
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.Header, "\t"))
	for _, row := range t.Rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	_ = tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

func (t Table) markdown() string {
	var b strings.Builder
	line := func(cells []string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	line(t.Header)
	separator := make([]string, len(t.Header))
	for i := range separator {
		separator[i] = "---"
		// Every column but the controller's name and the interval holds numbers.
		if t.Header[i] != "controller" && t.Header[i] != "release interval" {
			separator[i] = "---:"
		}
	}
	line(separator)
	for _, row := range t.Rows {
		line(row)
	}
	return b.String()
}

// ScalingTable shows how each controller's cost per release grows from
// one fleet size to the next it ran at (unsharded runs, sizes in
// increasing order): install CPU per release at both sizes and its
// change, and the peak RSS each added release cost. It has no rows for a
// controller that ran at one size only.
func ScalingTable(rows []Row) Table {
	t := Table{Header: []string{
		"controller", "N from", "N to", "CPU per release from (ms)", "CPU per release to (ms)",
		"CPU per release change (%)", "peak RSS per added release (KiB)",
	}}
	byController := map[string][]Row{}
	var order []string
	for _, r := range rows {
		if r.Shards != 0 {
			continue
		}
		if _, ok := byController[r.Controller]; !ok {
			order = append(order, r.Controller)
		}
		byController[r.Controller] = append(byController[r.Controller], r)
	}
	for _, controller := range order {
		runs := slices.Clone(byController[controller])
		slices.SortStableFunc(runs, func(a, b Row) int { return a.Releases - b.Releases })
		for i := 1; i < len(runs); i++ {
			from, to := runs[i-1], runs[i]
			if to.Releases == from.Releases {
				continue
			}
			perFrom := milliseconds(from.InstallCPU) / float64(from.Releases)
			perTo := milliseconds(to.InstallCPU) / float64(to.Releases)
			change := notAvailable
			if perFrom > 0 {
				change = fmt.Sprintf("%+.0f", 100*(perTo-perFrom)/perFrom)
			}
			t.Rows = append(t.Rows, []string{
				controller, strconv.Itoa(from.Releases), strconv.Itoa(to.Releases),
				fmt.Sprintf("%.0f", perFrom), fmt.Sprintf("%.0f", perTo), change,
				fmt.Sprintf("%.0f", float64(to.PeakRSSBytes-from.PeakRSSBytes)/1024/float64(to.Releases-from.Releases)),
			})
		}
	}
	return t
}
