package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/netfleet/netfleet/internal/node"
	"github.com/netfleet/netfleet/internal/testenv"
)

// runNode is --node: the control plane and a real node (internal/node), until ctx is done or a
// part of the node fails. The operator is not started: the chart runs it as a Pod.
func runNode(ctx context.Context, c *config, say func(string, ...any)) (err error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return fmt.Errorf("find the repository (the node's binaries are in its bin/): %w", err)
	}
	var undo []func() error
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			err = errors.Join(err, undo[i]())
		}
	}()
	dir := c.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "netfleet-node-"); err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
		undo = append(undo, func() error {
			if c.keep {
				say("kept state directory %s", dir)
				return nil
			}
			say("removing %s", dir)
			return os.RemoveAll(dir)
		})
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	opts := node.Options{Dir: dir, Assets: node.DefaultAssets(root), Images: c.archives, Logf: say}
	if st, err := os.Stat(c.crdDir); c.crdDir != "" && err == nil && st.IsDir() {
		opts.CRDDirs = []string{c.crdDir}
	}
	say("state directory %s; starting a node (needs root and `make node-assets test-assets`)", dir)
	n, err := node.Start(ctx, opts)
	if err != nil {
		return err
	}
	undo = append(undo, func() error {
		say("stopping the node")
		err := n.Stop(context.Background())
		if err == nil {
			say("the node is stopped and left nothing behind")
		}
		return err
	})
	info := n.Info()

	kubeconfig := info.Kubeconfig
	if c.kubeconfigOut != "" {
		b, err := os.ReadFile(info.Kubeconfig)
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.kubeconfigOut, b, 0o600); err != nil {
			return fmt.Errorf("write kubeconfig: %w", err)
		}
		kubeconfig = c.kubeconfigOut
		undo = append(undo, func() error { return removeIfExists(kubeconfig) })
	}
	say("kubeconfig for an admin user written; use it with:\n  export KUBECONFIG=%s", kubeconfig)
	say("node %s: players reach hostPorts at %s; Pods %s, Services %s", info.NodeName, info.NodeIP, info.PodCIDR, info.ServiceCIDR)

	if c.readyFile != "" {
		marks, err := json.Marshal(info.Marks)
		if err != nil {
			return err
		}
		if err := writeReadyFile(c.readyFile, []readyVar{
			{"KUBECONFIG", kubeconfig},
			{"NETFLEET_DEV_DIR", dir},
			{"NETFLEET_DEV_API_SERVER", info.APIServer},
			{"NETFLEET_DEV_NODE_NAME", info.NodeName},
			{"NETFLEET_DEV_NODE_IP", info.NodeIP.String()},
			{"NETFLEET_DEV_NODE_PID", strconv.Itoa(info.HolderPID)},
			{"NETFLEET_DEV_CONTAINERD", info.Containerd},
			{"NETFLEET_DEV_CTR", info.Ctr},
			{"NETFLEET_DEV_NODE_MARKS", string(marks)},
		}); err != nil {
			return err
		}
		undo = append(undo, func() error { return removeIfExists(c.readyFile) })
		say("ready file %s written", c.readyFile)
	}
	say("ready; install netfleet with helm install netfleet charts/netfleet -n netfleet-system --create-namespace; stop with Ctrl-C")

	failed := make(chan error, 1)
	go func() { failed <- n.Failed(ctx) }()
	select {
	case <-ctx.Done():
		say("shutting down")
		return nil
	case err := <-failed:
		if err == nil {
			return nil
		}
		return fmt.Errorf("the node failed: %w", err)
	}
}
