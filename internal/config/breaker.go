package config

import (
	"cmp"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Breaker is a route's circuit breaker: after Failures consecutive attempts
// that did not deliver, nothing is sent to the route for CoolDown, then one
// delivery is sent as a probe; a probe that does not deliver doubles the
// wait, up to MaxCoolDown. Written `breaker: off` to switch it off, or as a
// mapping of the three keys; absent, it is on with the defaults.
type Breaker struct {
	// Off switches the breaker off: every delivery is attempted whatever
	// the route's recent answers.
	Off bool `yaml:"-"`
	// Failures is how many consecutive attempts that did not deliver open
	// the circuit. Default 10.
	Failures int `yaml:"failures"`
	// CoolDown is the first wait before a probe. Default 30s.
	CoolDown Duration `yaml:"cool_down"`
	// MaxCoolDown caps the doubled waits. Default 10m.
	MaxCoolDown Duration `yaml:"max_cool_down"`
}

// Breaker defaults.
const (
	DefaultBreakerFailures    = 10
	DefaultBreakerCoolDown    = 30 * time.Second
	DefaultBreakerMaxCoolDown = 10 * time.Minute
)

// On reports whether the breaker is on.
func (b Breaker) On() bool { return !b.Off }

func (b *Breaker) setDefaults() {
	b.Failures = cmp.Or(b.Failures, DefaultBreakerFailures)
	b.CoolDown = cmp.Or(b.CoolDown, Duration(DefaultBreakerCoolDown))
	b.MaxCoolDown = cmp.Or(b.MaxCoolDown, Duration(max(DefaultBreakerMaxCoolDown, b.CoolDown.D())))
}

// UnmarshalYAML reads `off` (or false) or a mapping of failures, cool_down
// and max_cool_down; any other key is an error, as everywhere in the file.
func (b *Breaker) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value == "off" || n.Value == "false" {
			*b = Breaker{Off: true}
			return nil
		}
		return fmt.Errorf("line %d: breaker is off or a mapping of failures, cool_down and max_cool_down, not %q", n.Line, n.Value)
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: breaker is off or a mapping of failures, cool_down and max_cool_down", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		var err error
		switch k.Value {
		case "failures":
			err = val.Decode(&b.Failures)
		case "cool_down":
			err = val.Decode(&b.CoolDown)
		case "max_cool_down":
			err = val.Decode(&b.MaxCoolDown)
		default:
			return fmt.Errorf("line %d: field %s not found in type config.Breaker (keys: failures, cool_down, max_cool_down)", k.Line, k.Value)
		}
		if err != nil {
			return fmt.Errorf("breaker.%s: %w", k.Value, err)
		}
	}
	return nil
}

// validate checks a breaker that is on; key is routes[i].breaker.
func (v *validator) breaker(key string, b Breaker) {
	if b.Off {
		return
	}
	if b.Failures < 1 || b.Failures > 1000 {
		v.add(key+".failures", "must be between 1 and 1000, got %d", b.Failures)
	}
	v.positive(key+".cool_down", b.CoolDown)
	v.positive(key+".max_cool_down", b.MaxCoolDown)
	if b.CoolDown > b.MaxCoolDown {
		v.add(key+".cool_down", "%s is longer than max_cool_down (%s)", b.CoolDown.D(), b.MaxCoolDown.D())
	}
}
