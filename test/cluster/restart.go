package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"
)

// RestartAPIServer kills the API server, keeps it down for down, and starts
// it again on the same address over the same etcd, as a crash or an
// upgrade of the control plane does. Clients see their connections and
// watches cut and their requests refused until it is back. It returns once
// the new API server is ready.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) error {
	c.mu.Lock()
	i := slices.IndexFunc(c.procs, func(p *process) bool { return p.name == binAPIServer && !p.exited() })
	if c.stopping || i < 0 {
		c.mu.Unlock()
		return errors.New("no API server running")
	}
	old := c.procs[i]
	c.restarting = old
	c.mu.Unlock()

	if err := old.stop(0); err != nil {
		return fmt.Errorf("stopping the API server: %w", err)
	}
	c.mu.Lock()
	c.procs = slices.DeleteFunc(c.procs, func(p *process) bool { return p == old })
	c.restarting = nil
	c.mu.Unlock()
	c.logf("API server stopped for a restart; down for %s", down)

	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := c.run(binAPIServer, apiserverArgs(c.layout, c.ep)); err != nil {
		return fmt.Errorf("starting the API server again: %w", err)
	}
	client, err := kubernetes.NewForConfig(c.admin)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	if err := waitAPIServerReady(ctx, client); err != nil {
		return c.failure(binAPIServer, fmt.Errorf("waiting for readiness after a restart: %w", err))
	}
	c.logf("API server ready again")
	return nil
}
