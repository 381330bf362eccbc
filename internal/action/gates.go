package action

import "github.com/afterhooks/helm-controller/internal/features"

// ConfigOf is the Config of a controller whose gate states enabled
// reports. The controller (main.go) and `helm-controller plan`, which
// predicts with the gates of the controller it previews, both build their
// Config here, so the two cannot map a gate differently.
func ConfigOf(enabled func(gate string) bool) Config {
	return Config{
		UseHelm3Defaults: enabled(features.UseHelm3Defaults),
		AllowDNSLookups:  enabled(features.AllowDNSLookups),
		// The gate lets the built-in kinds it covers be recreated on
		// immutable-field refusals (see internal/recreate).
		RecreateImmutable: enabled(features.RecreateImmutableResources),
	}
}
