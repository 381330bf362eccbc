package simulator

import (
	_ "embed"
	"errors"
)

//go:embed stages.yaml
var stagesYAML []byte

// KwokStages returns the complete kwok Stage set (a multi-document YAML
// stream) for kwok's -c flag. Pods on kwok nodes only move when Run sets
// their gate annotation, so the two must be used together.
func KwokStages() ([]byte, error) {
	if len(stagesYAML) == 0 {
		return nil, errors.New("embedded kwok stages are empty")
	}
	out := make([]byte, len(stagesYAML))
	copy(out, stagesYAML)
	return out, nil
}
