package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ztsd/ztsd/bucketadmin"
	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/discovery"
	"github.com/ztsd/ztsd/objstore"
)

// bucketFlags say which bucket a remote command works on: the
// [object_store] section of --config (a ztsd.toml), overridden by the
// flags. Credentials come from the AWS SDK's standard chain
// (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or the shared credentials
// file and --profile), never from a flag.
type bucketFlags struct {
	configPath                                        string
	endpoint, bucket, prefix, region, profile, caFile string
	pathStyle, insecure                               bool
}

func (f *bucketFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.configPath, "config", "", "a ztsd.toml whose [object_store] names the bucket (the flags below override it)")
	fs.StringVar(&f.endpoint, "endpoint", "", "S3 API URL, e.g. http://127.0.0.1:7070 (object_store.endpoint)")
	fs.StringVar(&f.bucket, "bucket", "", "bucket name (object_store.bucket)")
	fs.StringVar(&f.prefix, "prefix", "", "key prefix (object_store.prefix)")
	fs.StringVar(&f.region, "region", "", "region (object_store.region; default us-east-1)")
	fs.StringVar(&f.profile, "profile", "", "section of the shared credentials file (object_store.profile)")
	fs.StringVar(&f.caFile, "tls-ca-file", "", "PEM CA certificates trusted for the endpoint (object_store.tls_ca_file)")
	fs.BoolVar(&f.pathStyle, "path-style", false, "address the bucket as endpoint/bucket/key (object_store.path_style)")
	fs.BoolVar(&f.insecure, "tls-insecure-skip-verify", false, "accept any certificate (object_store.tls_insecure_skip_verify)")
}

// used reports whether any bucket flag was given.
func (f *bucketFlags) used(cmd *cobra.Command) bool {
	for _, n := range []string{"config", "endpoint", "bucket", "prefix", "region", "profile", "tls-ca-file", "path-style", "tls-insecure-skip-verify"} {
		if cmd.Flags().Changed(n) {
			return true
		}
	}
	return false
}

// objectStore resolves the [object_store] settings.
func (f *bucketFlags) objectStore(cmd *cobra.Command) (config.ObjectStoreConfig, error) {
	cfg := config.Default()
	if f.configPath != "" {
		var err error
		if cfg, err = config.Load(f.configPath); err != nil {
			return cfg.ObjectStore, usageErr("--config: %v", err)
		}
	}
	o := cfg.ObjectStore
	set := func(name string, dst *string, v string) {
		if cmd.Flags().Changed(name) {
			*dst = v
		}
	}
	set("endpoint", &o.Endpoint, f.endpoint)
	set("bucket", &o.Bucket, f.bucket)
	set("prefix", &o.Prefix, f.prefix)
	set("region", &o.Region, f.region)
	set("profile", &o.Profile, f.profile)
	set("tls-ca-file", &o.TLSCAFile, f.caFile)
	if cmd.Flags().Changed("path-style") {
		o.PathStyle = f.pathStyle
	}
	if cmd.Flags().Changed("tls-insecure-skip-verify") {
		o.TLSInsecureSkipVerify = f.insecure
	}
	if o.Bucket == "" {
		return o, usageErr("no bucket: give --bucket, or --config with an [object_store] bucket")
	}
	check := config.Default()
	check.ObjectStore = o
	if err := check.Validate(); err != nil {
		return o, usageErr("%v", err)
	}
	return o, nil
}

// open opens the bucket.
func (f *bucketFlags) open(ctx context.Context, cmd *cobra.Command) (objstore.Bucket, config.ObjectStoreConfig, error) {
	o, err := f.objectStore(cmd)
	if err != nil {
		return nil, o, err
	}
	b, err := objstore.NewS3(ctx, o)
	if err != nil {
		return nil, o, &exitError{exitFailure, fmt.Errorf("bucket %s: %w", o.Bucket, err)}
	}
	return b, o, nil
}

// storeSelector parses --node and --store of verify --remote: --store is
// NODE/STOREID, or a STOREID with --node.
func storeSelector(node, store string) (*discovery.StoreKey, error) {
	if store == "" {
		return nil, nil
	}
	ref := store
	if !strings.Contains(store, "/") {
		if node == "" {
			return nil, usageErr("--store %s: give NODE/STOREID, or --node too", store)
		}
		ref = node + "/" + store
	}
	k, err := bucketadmin.ParseStoreRef(ref)
	if err != nil {
		return nil, usageErr("--store: %v", err)
	}
	if node != "" && k.Node != node {
		return nil, usageErr("--store %s is not a store of --node %s", store, node)
	}
	return &k, nil
}

// tempDirFlag is where remote commands download (default the system's).
func tempDirFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "temp-dir", "", "where stores are downloaded to be checked or repaired (default "+os.TempDir()+")")
}
