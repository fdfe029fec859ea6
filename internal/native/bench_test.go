package native_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/nativetest"
)

// turnsPerAttempt is the length of a benchmarked attempt: long enough for
// per-turn costs to dominate, short enough that resending the growing
// conversation (which every stateless agent does) stays realistic.
const turnsPerAttempt = 10

func benchReplies() []nativetest.Reply {
	var out []nativetest.Reply
	for i := range turnsPerAttempt - 1 {
		out = append(out, nativetest.Reply{Text: "Reading.", ToolCalls: []model.ToolCall{
			nativetest.Call(fmt.Sprintf("c%d", i), "read_file", map[string]any{"path": "main.go"})}, Usage: usage(1000, 20)})
	}
	return append(out, nativetest.Reply{Text: "Done.", Usage: usage(1000, 5)})
}

// BenchmarkTurnOverhead measures what Drover adds to each turn of a native
// attempt: encoding the request, the SDK's HTTP round trip and stream
// parsing against a server on loopback that answers at once, the event
// log, and one read_file tool call. Target: ≤ 5 ms per turn. The mock
// variant is the loop and the tool alone.
func BenchmarkTurnOverhead(b *testing.B) {
	for _, p := range append(providers, provider{name: "mock"}) {
		b.Run(p.name, func(b *testing.B) {
			e := newEnv(b)
			var srv *nativetest.Server
			var rt *native.Runtime
			if p.new != nil {
				srv = p.new(b, "")
				c, err := native.NewClient(native.Config{Provider: p.name, BaseURL: srv.BaseURL(), Model: srv.ModelID}, "", nil)
				if err != nil {
					b.Fatal(err)
				}
				rt = native.NewRuntime("bench", native.Config{Provider: p.name, Model: srv.ModelID}, c)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				var mock *nativetest.MockModelClient
				if srv != nil {
					srv.Push(benchReplies()...)
				} else {
					mock = nativetest.NewMock()
					for _, r := range benchReplies() {
						mock.Push(nativetest.Step{Response: &model.Response{Text: r.Text, ToolCalls: r.ToolCalls, Usage: r.Usage, StopReason: model.StopToolUse}})
					}
					rt = native.NewRuntime("bench", native.Config{Provider: "mock", Model: "m"}, mock)
				}
				b.StartTimer()
				res, err := rt.Run(context.Background(), e.input("Fix the typo."), discard{})
				if err != nil || res.Outcome != native.Completed || res.Turns != turnsPerAttempt {
					b.Fatalf("%+v %v", res, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*turnsPerAttempt), "ns/turn")
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkMemoryPerAttempt measures the worker's memory per concurrent
// native attempt: attempts that have taken two turns (a conversation with
// a file read into it) wait on their third model call, held open by the
// server. Heap and stacks in use, after a GC, are compared with before
// they started. The in-process test server's side of each connection is
// counted too, so the figure is an upper bound. Target: ≤ 5 MB.
func BenchmarkMemoryPerAttempt(b *testing.B) {
	const attempts = 50
	e := newEnv(b)
	// A realistic file to read: 20 KB of source.
	src := strings.Repeat("func f() { println(\"some code here\") }\n", 500)
	writeFile(b, e.wt, "big.go", src)
	for i := 0; i < b.N; i++ {
		srv := nativetest.NewAnthropic(b, "")
		for range attempts {
			srv.Push(
				nativetest.Reply{Text: "Reading.", ToolCalls: []model.ToolCall{nativetest.Call("a", "read_file", map[string]any{"path": "big.go"})}, Usage: usage(1000, 20)},
				nativetest.Reply{Text: "Listing.", ToolCalls: []model.ToolCall{nativetest.Call("b", "list_dir", map[string]any{})}, Usage: usage(6000, 20)},
			)
		}
		for range attempts {
			srv.Push(nativetest.Reply{Hang: true})
		}
		c, _ := native.NewClient(native.Config{Provider: "anthropic", BaseURL: srv.BaseURL(), Model: srv.ModelID}, "", nil)
		rt := native.NewRuntime("bench", native.Config{Provider: "anthropic", Model: srv.ModelID}, c)
		before := inUse()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range attempts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rt.Run(ctx, e.input("Read big.go."), discard{})
			}()
		}
		for range attempts {
			<-srv.Hung()
		}
		during := inUse()
		cancel()
		wg.Wait()
		srv.Close()
		b.ReportMetric(float64(during-before)/attempts, "B/attempt")
	}
}

func inUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}
