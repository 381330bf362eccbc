package preview

import (
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes pv as a compact section of a pull request comment,
// headed by title (the HelmRelease's namespace/name): the step and why,
// the chart change and where the chart came from, then per action its
// hooks, refused objects and objects, with the changed fields folded in
// a <details> block. Like the text, it never holds a value: fields and
// live changes are paths, and the reason went through the Secrets'
// redaction when the preview was computed.
func WriteMarkdown(w io.Writer, title string, pv *Preview) error {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("### %s", title)
	line("")
	line("**%s** (%s: %s), Helm release `%s`", pv.Step, pv.State, MarkdownText(pv.Reason), pv.Release)
	line("")
	chart := "`" + pv.Chart.To + "`"
	if pv.Chart.From != "" && pv.Chart.From != pv.Chart.To {
		chart = "`" + pv.Chart.From + "` → " + chart
	}
	line("- chart: %s", chart)
	if pv.Chart.Source != "" {
		line("- chart from: %s", MarkdownText(pv.Chart.Source))
	}
	if len(pv.ValuesChanged) > 0 {
		line("- values changed: %s", codeList(pv.ValuesChanged))
	}
	for _, a := range pv.Actions {
		line("")
		markdownAction(&b, a)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// markdownAction writes one action: a heading line, then a short list.
func markdownAction(b *strings.Builder, a Action) {
	line := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	head := "**" + string(a.Verb) + "**"
	if a.Plan.HookOrder != "" {
		head += ", hook order " + string(a.Plan.HookOrder)
	}
	o := a.Objects
	line("%s: create %d, update %d, delete %d", head, len(o.Create), len(o.Update), len(o.Delete))
	line("")
	for _, w := range a.Warnings {
		line("- **warning**: %s", MarkdownText(w))
	}
	if len(a.Hooks) > 0 {
		var hooks []string
		for _, h := range a.Hooks {
			hooks = append(hooks, fmt.Sprintf("%s `%s/%s` (weight %d)", h.Phase, h.Kind, h.Name, h.Weight))
		}
		line("- hooks: %s", strings.Join(hooks, ", "))
	}
	for _, v := range a.Recreates {
		if v.Recreate {
			line("- recreated: `%s` (%s); consent: %s", v.Object, MarkdownText(v.Fields), MarkdownText(string(v.Consent)))
		} else {
			line("- **refused in place**: `%s` (%s); the action fails: %s", v.Object, MarkdownText(v.Fields), MarkdownText(v.Refusal))
		}
	}
	objectLine(b, "created", o.Create)
	objectLine(b, "updated", o.Update)
	objectLine(b, "deleted", o.Delete)
	objectLine(b, "kept (resource-policy keep)", o.Keep)
	objectLine(b, "not deleted, already gone from the cluster", o.Absent)
	if a.CRDs != nil {
		var crds []string
		for _, ch := range a.CRDs.Changes {
			crds = append(crds, fmt.Sprintf("`%s` %s", ch.Name, ch.Change))
		}
		line("- CRDs (policy %s): %s", a.CRDs.Policy, strings.Join(crds, ", "))
	}
	if l := a.HookLeftovers; l != nil && len(l.Delete)+len(l.Leave) > 0 {
		line("- hook leftovers: delete %s; leave %s", codeList(l.Delete), codeList(l.Leave))
	}
	fieldDetails(b, o)
}

// objectLine lists objects on one line, names only.
func objectLine(b *strings.Builder, what string, objs []Object) {
	if len(objs) == 0 {
		return
	}
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.String()
	}
	fmt.Fprintf(b, "- %s: %s\n", what, codeList(names))
}

// fieldDetails folds, per object the action changes, its changed fields
// and what applying it changes live, as paths.
func fieldDetails(b *strings.Builder, o Objects) {
	var body strings.Builder
	n := 0
	for _, obj := range o.Update {
		n++
		fmt.Fprintf(&body, "~ %s\n", obj)
		for _, f := range obj.Fields {
			fmt.Fprintf(&body, "    %s\n", f)
		}
		writeLive(&body, obj)
	}
	for _, obj := range o.Create {
		if len(obj.Live) > 0 {
			n++
			fmt.Fprintf(&body, "+ %s\n", obj)
			writeLive(&body, obj)
		}
	}
	for _, obj := range o.Unchanged {
		if len(obj.Live) > 0 && obj.Live[0] != LiveNoChange {
			n++
			fmt.Fprintf(&body, "~ %s (manifest unchanged)\n", obj)
			writeLive(&body, obj)
		}
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(b, "\n<details><summary>changed fields of %s</summary>\n\n```\n%s```\n\n</details>\n", objectCount(n), body.String())
}

func writeLive(b *strings.Builder, obj Object) {
	for _, l := range obj.Live {
		fmt.Fprintf(b, "    live: %s\n", l)
	}
}

// WriteMarkdownSettings folds the controller settings the plans of a run
// predicted with, once for all its releases; a note (a Deployment not
// read) is shown unfolded, as it may make every prediction wrong.
func WriteMarkdownSettings(w io.Writer, s *Settings) error {
	if s == nil {
		return nil
	}
	var b strings.Builder
	for _, n := range s.Notes {
		fmt.Fprintf(&b, "\n> note: %s\n", MarkdownText(n))
	}
	var used []string
	for _, u := range s.Used {
		used = append(used, fmt.Sprintf("%s %s (%s)", u.Name, u.Value, u.From))
	}
	fmt.Fprintf(&b, "\n<details><summary>controller settings (Deployment %s)</summary>\n\n%s\n\n</details>\n",
		s.Controller, MarkdownText(strings.Join(used, "; ")))
	_, err := io.WriteString(w, b.String())
	return err
}

// codeList writes names as code spans, comma separated.
func codeList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return "`" + strings.Join(names, "`, `") + "`"
}

// markdownEscaper escapes what GitHub's markdown would read as markup or
// HTML in free text (reasons, errors, URLs).
var markdownEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "<", "&lt;", ">", "&gt;", "|", `\|`, "[", `\[`, "]", `\]`)

// MarkdownText is s as plain text in markdown.
func MarkdownText(s string) string { return markdownEscaper.Replace(s) }

func objectCount(n int) string {
	if n == 1 {
		return "1 object"
	}
	return fmt.Sprintf("%d objects", n)
}
