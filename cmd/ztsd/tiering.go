package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/tiering"
)

// tieringOn says whether this daemon uploads sealed stores: a bucket is
// configured and it is not a query node.
func tieringOn(cfg config.Config) bool { return cfg.ObjectStore.Enabled() && !cfg.QueryOnly }

// nodeName is object_store.node, or the host name.
func nodeName(cfg config.Config) (string, error) {
	if cfg.ObjectStore.Node != "" {
		return cfg.ObjectStore.Node, nil
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", fmt.Errorf("object_store.node is empty and the host name is unknown (%v)", err)
	}
	return h, nil
}

func localLimits(cfg config.Config) tiering.Limits {
	o := cfg.ObjectStore
	return tiering.Limits{MaxStores: o.LocalMaxStores, MaxTotalSize: int64(o.LocalMaxTotalSize), MaxAge: time.Duration(o.LocalMaxAge)}
}

func retentionLimits(cfg config.Config) tiering.Limits {
	r := cfg.Retention
	return tiering.Limits{MaxStores: r.MaxStores, MaxTotalSize: int64(r.MaxTotalSize), MaxAge: time.Duration(r.MaxAge)}
}

// tieringState is the running uploader.
type tieringState struct {
	up     *tiering.Uploader
	cancel context.CancelFunc
	done   chan struct{}
}

// sealedHook returns the storedir OnSealed callback that wakes the
// uploader once it runs.
func sealedHook(p *atomic.Pointer[tiering.Uploader]) func(uint32) {
	return func(uint32) {
		if u := p.Load(); u != nil {
			u.Kick()
		}
	}
}

// startTiering opens the bucket (credentials from the SDK's standard chain;
// never logged) and starts the uploader in the background.
func (d *daemonState) startTiering(reg prometheus.Registerer) error {
	o := d.cfg.ObjectStore
	node, err := nodeName(d.cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	bucket, err := objstore.NewS3(ctx, o)
	if err != nil {
		cancel()
		return err
	}
	up, err := tiering.New(d.db, tiering.Options{Bucket: bucket, Prefix: o.Prefix, Node: node,
		Local: localLimits(d.cfg), Retention: retentionLimits(d.cfg),
		Logger: d.log, Registerer: reg})
	if err != nil {
		cancel()
		return err
	}
	t := &tieringState{up: up, cancel: cancel, done: make(chan struct{})}
	d.tiering = t
	d.uploader.Store(up)
	go func() {
		defer close(t.done)
		up.Run(ctx)
	}()
	d.log.Info("uploading sealed stores", "endpoint", o.Endpoint, "bucket", o.Bucket, "prefix", o.Prefix, "node", node,
		"local_max_stores", o.LocalMaxStores, "local_max_total_size", int64(o.LocalMaxTotalSize), "local_max_age", time.Duration(o.LocalMaxAge))
	return nil
}

// stopTiering cancels the uploader and waits for it (an upload in flight
// is abandoned; the next start uploads that store again).
func (d *daemonState) stopTiering() {
	if d.tiering == nil {
		return
	}
	d.tiering.cancel()
	<-d.tiering.done
	d.tiering = nil
}
