// A single-member etcd for tests: one data dir, one client URL, one peer URL, no TLS.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func mustURL(flagName, raw string) url.URL {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		log.Fatalf("invalid --%s %q: %v", flagName, raw, err)
	}
	return *u
}

func main() {
	dataDir := flag.String("data-dir", "", "directory holding the etcd data (required)")
	clientURL := flag.String("listen-client-urls", "http://127.0.0.1:2379", "client URL to listen on and advertise")
	peerURL := flag.String("listen-peer-urls", "http://127.0.0.1:2380", "peer URL to listen on and advertise")
	noFsync := flag.Bool("unsafe-no-fsync", false, "skip fsync (tests only: data may be lost on a machine crash)")
	flag.Parse()
	if *dataDir == "" {
		log.Fatal("--data-dir is required")
	}

	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.LogLevel = "warn"
	cfg.UnsafeNoFsync = *noFsync
	client := mustURL("listen-client-urls", *clientURL)
	peer := mustURL("listen-peer-urls", *peerURL)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("starting etcd: %v", err)
	}
	defer e.Close()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-e.Server.ReadyNotify():
		log.Printf("etcd ready, serving %s", client.String())
	case err := <-e.Err():
		log.Fatalf("etcd failed: %v", err)
	case <-sig:
		return
	}
	select {
	case err := <-e.Err():
		log.Fatalf("etcd failed: %v", err)
	case <-sig:
	}
}
