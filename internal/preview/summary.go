package preview

import (
	"fmt"
	"strings"
)

// Summary is the preview in one line, for a status field: the step and
// why, the chart change, and per action what it does to the objects and
// which refused objects it recreates or fails on.
func (p *Preview) Summary() string {
	parts := []string{fmt.Sprintf("%s (%s: %s)", p.Step, p.State, p.Reason)}
	if p.Chart.From != "" && p.Chart.From != p.Chart.To {
		parts = append(parts, "chart "+p.Chart.From+" -> "+p.Chart.To)
	}
	for _, a := range p.Actions {
		o := a.Objects
		s := fmt.Sprintf("%s: create %d, update %d, delete %d, keep %d", a.Verb, len(o.Create), len(o.Update), len(o.Delete), len(o.Keep))
		recreated, refused := 0, 0
		for _, v := range a.Recreates {
			if v.Recreate {
				recreated++
			} else {
				refused++
			}
		}
		if recreated+refused > 0 {
			s += fmt.Sprintf(", recreate %d, refused %d", recreated, refused)
		}
		if len(a.Hooks) > 0 {
			s += fmt.Sprintf(", %d hooks", len(a.Hooks))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
