package preview

import (
	"fmt"
	"io"
	"strings"

	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/recreate"
)

// ANSI colours of the text output, used only on a terminal.
const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	bold   = "\x1b[1m"
	reset  = "\x1b[0m"
)

// printer writes a preview as text, coloured or not.
type printer struct {
	b     strings.Builder
	color bool
}

func (p *printer) paint(color, s string) string {
	if !p.color {
		return s
	}
	return color + s + reset
}

func (p *printer) line(format string, args ...any) {
	fmt.Fprintf(&p.b, format+"\n", args...)
}

// WriteText writes pv for a reader: the step and why, the chart and
// values change, then each action with its sequence, hooks and objects.
func WriteText(w io.Writer, pv *Preview, color bool) error {
	p := &printer{color: color}
	p.line("release %s: %s", pv.Release, p.paint(bold, "next step: "+string(pv.Step)))
	p.line("  state %s: %s", pv.State, pv.Reason)
	if pv.Chart.From != "" && pv.Chart.From != pv.Chart.To {
		p.line("  chart: %s -> %s", pv.Chart.From, pv.Chart.To)
	} else {
		p.line("  chart: %s", pv.Chart.To)
	}
	if pv.Chart.Source != "" {
		p.line("  chart from: %s", pv.Chart.Source)
	}
	if len(pv.ValuesChanged) > 0 {
		p.line("  values changed: %s", strings.Join(pv.ValuesChanged, ", "))
	}
	for _, a := range pv.Actions {
		p.action(a)
	}
	p.settings(pv.Settings)
	p.line("not shown yet:")
	for _, s := range pv.NotShown {
		p.line("  - %s", s)
	}
	_, err := io.WriteString(w, p.b.String())
	return err
}

func (p *printer) action(a Action) {
	p.line("")
	head := string(a.Verb)
	if a.Plan.HookOrder != "" {
		head += ", hook order " + string(a.Plan.HookOrder)
	}
	if a.Plan.Revision.Version != 0 {
		head += fmt.Sprintf(", revision %d", a.Plan.Revision.Version)
	}
	if a.Plan.Recreate != nil {
		head += fmt.Sprintf(", RecreateImmutableResources gate %t", a.Plan.Recreate.Gate)
	}
	p.line("%s", p.paint(bold, head))
	for _, w := range a.Warnings {
		p.line("  %s %s", p.paint(yellow, "warning:"), w)
	}
	p.line("  sequence:")
	for i, s := range a.Sequence {
		p.line("    %d. %s", i+1, s)
	}
	if len(a.Hooks) > 0 {
		p.line("  hooks, in order:")
		for _, h := range a.Hooks {
			policies := strings.Join(h.DeletePolicies, ",")
			if policies == "" {
				policies = "before-hook-creation (default)"
			}
			p.line("    %-13s weight %-4d %s/%s, delete policy %s", h.Phase, h.Weight, h.Kind, h.Name, policies)
		}
	}
	p.crds(a.CRDs)
	p.objects(a.Objects)
	p.recreates(a.Recreates)
	if a.Order != nil {
		var b strings.Builder
		_ = a.Order.Describe(&b)
		p.line("  order: %s", strings.TrimRight(strings.ReplaceAll(b.String(), "\n", "\n    "), " \n"))
	}
	if l := a.HookLeftovers; l != nil {
		for _, o := range l.Delete {
			p.line("  %s %s (hook leftover, deleteHookResources)", p.paint(red, "-"), o)
		}
		for _, o := range l.Leave {
			p.line("  = %s (hook leftover left)", o)
		}
	}
}

// crds prints the CRD step, before the objects it makes room for.
func (p *printer) crds(c *action.CRDPlan) {
	if c == nil {
		return
	}
	how := "client-side"
	if c.ServerSide {
		how = "server-side"
	}
	p.line("  CRDs of crds/ (policy %s, %s), before the objects:", c.Policy, how)
	for _, ch := range c.Changes {
		mark := "="
		switch ch.Change {
		case action.CRDCreate:
			mark = p.paint(green, "+")
		case action.CRDUpdate:
			mark = p.paint(yellow, "~")
		}
		p.line("    %s CustomResourceDefinition/%s (%s)", mark, ch.Name, ch.Change)
	}
}

func (p *printer) objects(o Objects) {
	for _, obj := range o.Create {
		p.line("  %s %s%s%s", p.paint(green, "+"), obj, selfDeleting(obj), live(obj))
	}
	for _, obj := range o.Update {
		p.line("  %s %s (%s)%s", p.paint(yellow, "~"), obj, strings.Join(obj.Fields, ", "), live(obj))
	}
	for _, obj := range o.Delete {
		p.line("  %s %s", p.paint(red, "-"), obj)
	}
	for _, obj := range o.Keep {
		p.line("  = %s (kept: helm.sh/resource-policy keep)", obj)
	}
	for _, obj := range o.Absent {
		p.line("  = %s (%s)", obj, absentNote)
	}
	n := 0
	for _, obj := range o.Unchanged {
		if len(obj.Live) == 0 || obj.Live[0] == LiveNoChange {
			n++
			continue
		}
		// The manifest did not change, the live object did: applying
		// the manifest changes it back.
		p.line("  %s %s (manifest unchanged)%s", p.paint(yellow, "~"), obj, live(obj))
	}
	if n > 0 {
		p.line("  %d objects unchanged", n)
	}
}

// selfDeleting notes, on a created Job's line, that it will not stay.
func selfDeleting(obj Object) string {
	if !obj.SelfDeleting {
		return ""
	}
	return " (deletes itself once finished: ttlSecondsAfterFinished)"
}

// live is what applying obj changes in the cluster, for its line.
func live(obj Object) string {
	if len(obj.Live) == 0 {
		return ""
	}
	return "; live: " + strings.Join(obj.Live, ", ")
}

// recreates writes what the action would do with each object refused in
// place: recreate it, with whose consent, or fail, and why.
func (p *printer) recreates(verdicts []recreate.Verdict) {
	for _, v := range verdicts {
		if v.Recreate {
			p.line("  %s %s recreated (deleted and created again): %s; consent: %s", p.paint(yellow, "!"), v.Object, v.Fields, v.Consent)
			continue
		}
		p.line("  %s %s refused in place (%s); the action fails: %s", p.paint(red, "!"), v.Object, v.Fields, v.Refusal)
	}
}

// settings lists the controller settings the plan predicted with, so a
// reader can tell a prediction made with the wrong ones.
func (p *printer) settings(s *Settings) {
	if s == nil {
		return
	}
	p.line("")
	p.line("%s", p.paint(bold, "controller settings (Deployment "+s.Controller+"):"))
	for _, u := range s.Used {
		p.line("  %s: %s (%s)", u.Name, u.Value, u.From)
	}
	for _, n := range s.Notes {
		p.line("  %s", p.paint(yellow, "note: "+n))
	}
}
