package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsNode is one nats-server process with JetStream on disk, standalone or
// a node of a cluster. It keeps its port and store across restarts, so
// clients reconnect by themselves and nothing acknowledged may be missing.
type natsNode struct {
	t      *testing.T
	name   string
	port   int
	conf   string
	proc   *proc
	starts int
}

// freePort finds a loopback port nothing listens on. A server may still
// race us to it; on a test machine that is rare enough.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startNATS starts a standalone nats-server with JetStream, fsync on every
// write (the setting Drover recommends).
func startNATS(t *testing.T) *natsNode {
	t.Helper()
	return startNATSCluster(t, 1)[0]
}

// startNATSCluster starts n nats-server processes routed into one
// JetStream cluster (n=1: a standalone server), and waits until JetStream
// answers.
func startNATSCluster(t *testing.T, n int) []*natsNode {
	t.Helper()
	nodes := newNATSCluster(t, n)
	for _, node := range nodes {
		node.start()
	}
	waitJetStream(t, clusterURL(nodes), n)
	return nodes
}

// newNATSCluster configures n nats-server nodes routed into one JetStream
// cluster (n=1: a standalone server), on ports of their own, and starts
// none of them.
func newNATSCluster(t *testing.T, n int) []*natsNode {
	t.Helper()
	dir := t.TempDir()
	ports, routes := make([]int, n), make([]int, n)
	for i := range n {
		ports[i], routes[i] = freePort(t), freePort(t)
	}
	nodes := make([]*natsNode, n)
	for i := range n {
		name := fmt.Sprintf("nats-%d", i+1)
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n  sync_interval: always\n}\n",
			name, ports[i], filepath.Join(dir, name))
		if n > 1 {
			var rs []string
			for j := range n {
				if j != i {
					rs = append(rs, fmt.Sprintf("nats-route://127.0.0.1:%d", routes[j]))
				}
			}
			conf += fmt.Sprintf("cluster {\n  name: drover-e2e\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n", routes[i], strings.Join(rs, ", "))
		}
		path := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		nodes[i] = &natsNode{t: t, name: name, port: ports[i], conf: path}
	}
	return nodes
}

func (s *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// clusterURL is the client URL listing every node.
func clusterURL(nodes []*natsNode) string {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.url()
	}
	return strings.Join(urls, ",")
}

func (s *natsNode) start() {
	s.starts++
	s.proc = start(s.t, fmt.Sprintf("%s.%d", s.name, s.starts), nil, "nats-server", "-c", s.conf)
	waitFor(s.t, 30*time.Second, s.name+" to listen", func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second)
		if err == nil {
			c.Close()
			return true
		}
		select {
		case <-s.proc.done:
			s.t.Fatalf("%s exited: %v", s.name, s.proc.err)
		default:
		}
		return false
	})
}

// kill ends the server with SIGKILL: no shutdown, no final flush.
func (s *natsNode) kill() {
	_ = syscall.Kill(-s.proc.cmd.Process.Pid, syscall.SIGKILL)
	<-s.proc.done
}

// restart kills the server and starts it again on the same port and store.
func (s *natsNode) restart() {
	s.kill()
	s.start()
}

// waitJetStream waits until JetStream answers at url and can place a
// stream on `servers` servers: in a cluster, a meta leader answering is
// not yet every server known to it, and a controller creating its R3
// streams before that is refused ("no suitable peers for placement").
func waitJetStream(t *testing.T, url string, servers int) {
	t.Helper()
	nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, fmt.Sprintf("JetStream at %s to place a stream on %d servers", url, servers), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := js.AccountInfo(ctx); err != nil {
			return false
		}
		if servers == 1 {
			return true
		}
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "E2E_PROBE", Subjects: []string{"e2e.probe"},
			Replicas: servers, Storage: jetstream.MemoryStorage})
		return err == nil && js.DeleteStream(ctx, "E2E_PROBE") == nil
	})
}
