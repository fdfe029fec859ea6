package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/forge"
	"github.com/drover-dev/drover/internal/forge/forgetest"
)

const (
	forgeToken  = "e2e-forge-token-0123456789"
	forgeSecret = "e2e-hook-secret-0123456789"
)

// branchSHA is what a branch of a bare repository is at, "" when it does
// not exist: the fake forge's view of a pull request's head.
func branchSHA(repo, branch string) string {
	cmd := exec.Command("git", "--git-dir", repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// TestPullRequestLoop runs the loop with real processes and a fake GitHub:
// a flow succeeds and its pull request is opened; the fake's review
// requesting changes, with a line comment, is delivered by a signed
// webhook (a replay, an unsigned, a wrongly signed and another
// repository's delivery are refused) and starts a round whose prompt
// carries the comment, whose commit is pushed to the pull request's branch
// and which comments back; a failing check starts another round with its
// log; max_rounds stops a third until an operator's iterate; a rebuild
// agrees. A second flow on a forge that refuses its token ends publishing
// with AUTH_FAILED and stays succeeded.
func TestPullRequestLoop(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	fake := forgetest.New(t, forge.GitHub, "acme/app", forgeToken)
	fake.HeadSHA = func(branch string) string { return branchSHA(repo, branch) }
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf(`forges:
  fake:
    type: github
    base_url: %s
    token_env: E2E_FORGE_TOKEN
    webhook_secret_env: E2E_FORGE_SECRET
  refusing:
    type: github
    base_url: %s
    token_env: E2E_OTHER_TOKEN
`, fake.URL, fake.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	c := startController(t, "DROVER_CONFIG="+cfgFile, "DROVER_HTTP_LISTEN="+addr,
		"E2E_FORGE_TOKEN="+forgeToken, "E2E_FORGE_SECRET="+forgeSecret, "E2E_OTHER_TOKEN=not-the-token-0123456789")
	c.startWorker("w1", 2)
	hookURL := "http://" + addr + "/forges/fake/webhook"

	out, errOut, code := c.cli("submit", writeFlow(t, fmt.Sprintf(`name: pr
repo: %s
base: main
runtime: demo
tasks:
  - id: greet
    prompt: |
      @write hello.txt Hello
publish:
  pull_request: {forge: fake, repo: acme/app, labels: [drover]}
  iterate:
    max_rounds: 2
    poll_interval: 1h
    prompt: |
      @prompt round-prompt.txt
      @append rounds.txt a round
`, repo)))
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errOut)
	}
	id := submittedID(t, out)
	head := drovertype.IntegrationBranch(id, 1)
	pr := func() *projection.PullRequest { return c.status(id).Detail.Flow.PR }
	waitFor(t, 2*time.Minute, "the pull request to be opened", func() bool {
		p := pr()
		return p != nil && p.Number == 1 && p.State == "open"
	})
	prs := fake.PRs()
	if len(prs) != 1 || prs[0].Head != head || prs[0].Base != "main" || !strings.Contains(prs[0].Body, "| greet | demo | 1 |") ||
		len(prs[0].Labels) != 1 {
		t.Fatalf("the forge holds %+v", prs)
	}

	// A review requesting changes, with a line comment, and the
	// deliveries about it.
	fake.AddReview(1, forge.Review{Author: "dave", State: forge.ChangesRequested, Body: "not quite",
		Comments: []forge.Comment{{Path: "hello.txt", Line: 1, Body: "greet the whole world", Author: "dave"}}})
	deliver := func(h forgetest.Webhook, url string, want int) {
		t.Helper()
		got, err := h.Post(url)
		if err != nil || got != want {
			t.Fatalf("delivery %s: %d, %v; want %d", h.Header.Get("X-Github-Delivery"), got, err, want)
		}
	}
	deliver(fake.GitHubWebhook("pull_request_review", "d-unsigned", 1, ""), hookURL, http.StatusUnauthorized)
	deliver(fake.GitHubWebhook("pull_request_review", "d-wrong", 1, "not-the-secret"), hookURL, http.StatusUnauthorized)
	other := forgetest.New(t, forge.GitHub, "evil/app", forgeToken)
	deliver(other.GitHubWebhook("pull_request_review", "d-other", 1, forgeSecret), hookURL, http.StatusNotFound)
	review := fake.GitHubWebhook("pull_request_review", "d-1", 1, forgeSecret)
	deliver(review, hookURL, http.StatusAccepted)
	deliver(review, hookURL, http.StatusConflict)

	round := func(n int) *projection.ReviewRound {
		p := pr()
		if p == nil || len(p.Rounds) < n || p.Rounds[n-1].State == projection.RoundRunning {
			return nil
		}
		return p.Rounds[n-1]
	}
	waitFor(t, 2*time.Minute, "round 1", func() bool { return round(1) != nil && len(fake.PRs()[0].Comments) >= 1 })
	r1 := round(1)
	if r1.State != projection.RoundSucceeded || r1.Commit != branchSHA(repo, head) {
		t.Fatalf("round 1: %+v; the branch is at %s", r1, branchSHA(repo, head))
	}
	prompt := show(t, repo, head, "round-prompt.txt")
	for _, want := range []string{"Comment by dave on hello.txt line 1:", "> greet the whole world", "pull request #1"} {
		if !strings.Contains(prompt, want) {
			t.Fatalf("round 1's prompt lacks %q:\n%s", want, prompt)
		}
	}
	if got := show(t, repo, head, "hello.txt"); got != "Hello" {
		t.Fatalf("the task's own result is gone from the branch: %q", got)
	}
	if cm := fake.PRs()[0].Comments[0]; !strings.Contains(cm, "Drover round 1") || !strings.Contains(cm, "by demo") {
		t.Fatalf("round 1's comment: %s", cm)
	}

	// A failed check of the new head starts round 2, with its log.
	fake.SetChecks(branchSHA(repo, head), forge.Check{Name: "test", Status: forge.CheckFailed, Summary: "1 test failed",
		LogTail: "--- FAIL: TestGreeting (0.00s)"})
	deliver(fake.GitHubWebhook("check_run", "d-2", 1, forgeSecret), hookURL, http.StatusAccepted)
	waitFor(t, 2*time.Minute, "round 2", func() bool { return round(2) != nil && len(fake.PRs()[0].Comments) >= 2 })
	prompt = show(t, repo, head, "round-prompt.txt")
	for _, want := range []string{"Check test: failure", "> --- FAIL: TestGreeting (0.00s)", "round 2"} {
		if !strings.Contains(prompt, want) {
			t.Fatalf("round 2's prompt lacks %q:\n%s", want, prompt)
		}
	}
	if got := show(t, repo, head, "rounds.txt"); got != "a round\na round" {
		t.Fatalf("rounds.txt: %q", got)
	}

	// max_rounds is 2: another review waits, and starts nothing.
	fake.AddReview(1, forge.Review{Author: "dave", State: forge.ChangesRequested, Body: "one more thing"})
	deliver(fake.GitHubWebhook("pull_request_review", "d-3", 1, forgeSecret), hookURL, http.StatusAccepted)
	waitFor(t, time.Minute, "the third review to be recorded", func() bool {
		p := pr()
		return p != nil && len(p.Feedback) > 0 && p.Feedback[len(p.Feedback)-1].Kind == event.FeedbackChangesRequested
	})
	text, _, _ := c.cli("status", id)
	if !strings.Contains(text, "max_rounds (2) reached") {
		t.Fatalf("status does not say max_rounds stopped the rounds:\n%s", text)
	}
	if evs := ofType(c.events(id), event.ReviewRoundStarted, ""); len(evs) != 2 {
		t.Fatalf("%d rounds started", len(evs))
	}
	// An operator's iterate starts one anyway, with what waits.
	if _, errOut, code := c.cli("iterate", id, "--reason", "and say goodbye"); code != 0 {
		t.Fatalf("iterate: %d %s", code, errOut)
	}
	waitFor(t, 2*time.Minute, "round 3", func() bool { return round(3) != nil && len(fake.PRs()[0].Comments) >= 3 })
	prompt = show(t, repo, head, "round-prompt.txt")
	if !strings.Contains(prompt, "> one more thing") || !strings.Contains(prompt, "> and say goodbye") {
		t.Fatalf("round 3's prompt:\n%s", prompt)
	}
	if prs := fake.PRs(); len(prs) != 1 || strings.Count(strings.Join(prs[0].Comments, "\n"), "Drover round") != 3 {
		t.Fatalf("after three rounds the forge holds %d pull requests, comments %q", len(prs), prs[0].Comments)
	}
	text, _, _ = c.cli("status", id)
	for _, want := range []string{"pull request acme/app#1 on fake: open", "round 1: succeeded", "round 3: succeeded"} {
		if !strings.Contains(text, want) {
			t.Fatalf("status lacks %q:\n%s", want, text)
		}
	}

	refused(t, c, repo)
	c.rebuildEqual()
}

// refused: a flow whose forge refuses the token succeeds; publishing
// ends with AUTH_FAILED naming the variable; --dry-run still shows the
// body.
func refused(t *testing.T, c *cluster, repo string) {
	t.Helper()
	out, errOut, code := c.cli("submit", writeFlow(t, fmt.Sprintf(`name: q
repo: %s
base: main
runtime: demo
tasks:
  - {id: a, prompt: "@write q.txt q"}
publish:
  pull_request: {forge: refusing, repo: acme/app}
`, repo)))
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errOut)
	}
	id := submittedID(t, out)
	waitFor(t, 2*time.Minute, "publishing to be refused", func() bool {
		f := c.status(id).Detail.Flow
		return f.PR != nil && f.PR.Error != nil
	})
	f := c.status(id).Detail.Flow
	if f.State != drovertype.FlowSucceeded || f.PR.Error.Class != drovertype.ClassAuthFailed ||
		!strings.Contains(f.PR.Error.Message, "$E2E_OTHER_TOKEN") || strings.Contains(f.PR.Error.Message, "not-the-token") {
		t.Fatalf("flow %s, publishing %+v", f.State, f.PR.Error)
	}
	out, _, code = c.cli("publish", id, "--dry-run")
	if code != 0 || !strings.Contains(out, "title: q") || !strings.Contains(out, "| a | demo | 1 |") {
		t.Fatalf("publish --dry-run: %d\n%s", code, out)
	}
}
