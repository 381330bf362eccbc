package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// controllers are the processes a run measures: one controller, or the
// shards of one (Options.Shards). Every figure of a run is their sum.
type controllers []*controllerProcess

// alive reports an error once any of them has exited.
func (cs controllers) alive() error {
	for _, c := range cs {
		if err := c.alive(); err != nil {
			return err
		}
	}
	return nil
}

func (cs controllers) waitServing(ctx context.Context) error {
	for _, c := range cs {
		if err := c.waitServing(ctx); err != nil {
			return fmt.Errorf("waiting for the %s controller to serve metrics: %w", c.name, err)
		}
	}
	return nil
}

func (cs controllers) waitIdle(ctx context.Context) error {
	for _, c := range cs {
		if err := c.waitIdle(ctx); err != nil {
			return fmt.Errorf("waiting for the %s controller to finish starting: %w", c.name, err)
		}
	}
	return nil
}

func (cs controllers) cpuTime() (time.Duration, error) {
	var sum time.Duration
	for _, c := range cs {
		t, err := c.cpuTime()
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

func (cs controllers) metric(ctx context.Context, name string) (float64, error) {
	var sum float64
	for _, c := range cs {
		v, err := c.controllerMetric(ctx, name)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// peakRSSBytes is the sum of their high-water marks: what the deployment
// needs at most, if the peaks met.
func (cs controllers) peakRSSBytes() (int64, error) {
	var sum int64
	for _, c := range cs {
		b, err := c.peakRSSBytes()
		if err != nil {
			return 0, err
		}
		sum += b
	}
	return sum, nil
}

func (cs controllers) stop() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.stop())
	}
	return errors.Join(errs...)
}

// explain adds the end of each one's log to err.
func (cs controllers) explain(err error) error {
	for _, c := range cs {
		err = c.explain(err)
	}
	return err
}
