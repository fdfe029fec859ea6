package forges_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/forge"
	"github.com/drover-dev/drover/internal/forge/forges"
	"github.com/drover-dev/drover/internal/forge/forgetest"
)

const (
	head  = "drover/flow-abc/integration"
	base  = "main"
	token = "t0ken-for-tests"
)

func repoFor(k forge.Kind) string {
	if k == forge.GitLab {
		return "group/sub/app"
	}
	return "acme/app"
}

// TestForges runs each forge's client against its fake: publish, look up
// by head, update, comment once, read a review with its line comment and
// a failing check with its log.
func TestForges(t *testing.T) {
	for _, k := range forge.Kinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			repo := repoFor(k)
			fake := forgetest.New(t, k, repo, token)
			fake.SetHead(head, "c0ffee0000000000000000000000000000000001")
			fake.SetLabels("drover", "bot")
			f, err := forges.Open(fake.Config())
			if err != nil {
				t.Fatal(err)
			}
			if b, err := f.DefaultBranch(ctx, repo); err != nil || b != "main" {
				t.Fatalf("DefaultBranch = %q, %v", b, err)
			}
			if pr, err := f.FindPullRequest(ctx, repo, head, base); err != nil || pr != nil {
				t.Fatalf("FindPullRequest before any = %+v, %v", pr, err)
			}
			pub := forge.Publication{Head: head, Base: base, Title: "flow-abc", Body: "the body", Draft: true,
				Labels: []string{"drover"}, Reviewers: []string{"alice"}, Assignees: []string{"bob"}}
			pr, err := f.CreatePullRequest(ctx, repo, pub)
			if err != nil {
				t.Fatal(err)
			}
			if pr.Number != 1 || pr.State != forge.Open || pr.Head != head || pr.Base != base || pr.URL == "" {
				t.Fatalf("created %+v", pr)
			}
			got := fake.PRs()[0]
			if !got.Draft || len(got.Labels) != 1 || got.Labels[0] != "drover" || len(got.Reviewers) != 1 || len(got.Assignees) != 1 {
				t.Fatalf("fake holds %+v", got)
			}
			found, err := f.FindPullRequest(ctx, repo, head, base)
			if err != nil || found == nil || found.Number != 1 || found.HeadSHA != "c0ffee0000000000000000000000000000000001" {
				t.Fatalf("FindPullRequest = %+v, %v", found, err)
			}
			pub.Body = "the body, round 1"
			if _, err := f.UpdatePullRequest(ctx, repo, 1, pub); err != nil {
				t.Fatal(err)
			}
			if b := fake.PRs()[0].Body; b != pub.Body {
				t.Fatalf("body after update = %q", b)
			}
			for range 2 {
				if _, err := f.Comment(ctx, repo, 1, "<!-- drover:r1 -->", "round 1 done <!-- drover:r1 -->"); err != nil {
					t.Fatal(err)
				}
			}
			if cs := fake.PRs()[0].Comments; len(cs) != 1 {
				t.Fatalf("comments after commenting twice with one marker: %q", cs)
			}
			checkReviews(t, f, fake, repo)
			checkChecks(t, f, fake, repo, found)
		})
	}
}

func checkReviews(t *testing.T, f forge.Forge, fake *forgetest.Fake, repo string) {
	t.Helper()
	fake.AddReview(1, forge.Review{Author: "carol", State: forge.Approved, Body: "fine"})
	fake.AddReview(1, forge.Review{Author: "dave", State: forge.ChangesRequested, Body: "not yet",
		Comments: []forge.Comment{{Path: "internal/x/x.go", Line: 42, Body: "handle the error", Author: "dave"}}})
	rs, err := f.Reviews(context.Background(), repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	var cr []forge.Review
	for _, r := range rs {
		if r.State == forge.ChangesRequested {
			cr = append(cr, r)
		}
	}
	if len(cr) != 1 || cr[0].Author != "dave" || cr[0].ID == "" || len(cr[0].Comments) != 1 {
		t.Fatalf("reviews = %+v", rs)
	}
	if c := cr[0].Comments[0]; c.Path != "internal/x/x.go" || c.Line != 42 || c.Body != "handle the error" {
		t.Fatalf("comment = %+v", c)
	}
	again, err := f.Reviews(context.Background(), repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again {
		if r.State == forge.ChangesRequested && r.ID != cr[0].ID {
			t.Fatalf("a review's id changed between two reads: %s, then %s", cr[0].ID, r.ID)
		}
	}
}

func checkChecks(t *testing.T, f forge.Forge, fake *forgetest.Fake, repo string, pr *forge.PullRequest) {
	t.Helper()
	checks := []forge.Check{{Name: "lint", Status: forge.CheckPassed},
		{Name: "test", Status: forge.CheckFailed, Summary: "2 tests failed", LogTail: "--- FAIL: TestX\nFAIL\n"}}
	if fake.Kind == forge.GitHub { // and a commit status beside the check runs
		checks = append(checks, forge.Check{ID: "status-ci/deploy", Name: "ci/deploy", Status: forge.CheckPending})
	}
	fake.SetChecks(pr.HeadSHA, checks...)
	cs, err := f.Checks(context.Background(), repo, pr)
	if err != nil {
		t.Fatal(err)
	}
	var failed []forge.Check
	for _, c := range cs {
		if c.Status == forge.CheckFailed {
			failed = append(failed, c)
		}
	}
	if len(cs) != len(checks) || len(failed) != 1 || failed[0].Name != "test" || failed[0].Conclusion == "" {
		t.Fatalf("checks = %+v", cs)
	}
	if fake.Kind == forge.GitHub && (cs[2].Name != "ci/deploy" || cs[2].Status != forge.CheckPending) {
		t.Fatalf("the commit status: %+v", cs[2])
	}
	if fake.Kind != forge.Gitea && !strings.Contains(failed[0].LogTail, "--- FAIL: TestX") {
		t.Fatalf("failed check's log tail = %q", failed[0].LogTail)
	}
}

// TestRefusals: a token the forge refuses is ErrAuth, another repository
// ErrNotFound, a second pull request for one head a refusal; all
// permanent. Nothing of the token is in the error.
func TestRefusals(t *testing.T) {
	for _, k := range forge.Kinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			repo := repoFor(k)
			fake := forgetest.New(t, k, repo, token)
			cfg := fake.Config()
			cfg.Token = "wrong-secret-token"
			f, err := forges.Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.FindPullRequest(ctx, repo, head, base)
			if !errors.Is(err, forge.ErrAuth) || !forge.Permanent(err) {
				t.Fatalf("with a wrong token: %v", err)
			}
			if strings.Contains(err.Error(), "wrong-secret-token") {
				t.Fatalf("the error holds the token: %v", err)
			}
			good, _ := forges.Open(fake.Config())
			other := strings.Replace(repo, "app", "other", 1)
			if _, err := good.PullRequest(ctx, other, 1); !errors.Is(err, forge.ErrNotFound) || !forge.Permanent(err) {
				t.Fatalf("another repository: %v", err)
			}
			pub := forge.Publication{Head: head, Base: base, Title: "t", Body: "b"}
			if _, err := good.CreatePullRequest(ctx, repo, pub); err != nil {
				t.Fatal(err)
			}
			if _, err := good.CreatePullRequest(ctx, repo, pub); !forge.Permanent(err) {
				t.Fatalf("a second pull request for one head: %v", err)
			}
		})
	}
}

// TestUnreachable: a forge that does not answer is not permanent.
func TestUnreachable(t *testing.T) {
	for _, k := range forge.Kinds {
		fake := forgetest.New(t, k, repoFor(k), token)
		cfg := fake.Config()
		cfg.BaseURL = "http://127.0.0.1:1/"
		f, err := forges.Open(cfg)
		if err == nil {
			_, err = f.FindPullRequest(context.Background(), repoFor(k), head, base)
		}
		if err == nil || forge.Permanent(err) {
			t.Errorf("%s unreachable: %v", k, err)
		}
	}
}

func webhook(fake *forgetest.Fake, event, delivery, secret string) forgetest.Webhook {
	switch fake.Kind {
	case forge.GitHub:
		if event == "" {
			event = "pull_request_review"
		}
		return fake.GitHubWebhook(event, delivery, 1, secret)
	case forge.GitLab:
		if event == "" {
			event = "Merge Request Hook"
		}
		return fake.GitLabWebhook(event, delivery, 1, secret)
	}
	if event == "" {
		event = "pull_request_review_rejected"
	}
	return fake.GiteaWebhook(event, delivery, 1, secret)
}

// TestWebhooks: a delivery signed as each forge signs passes and reads as
// its repository, pull request and commit; unsigned and wrongly signed
// ones are refused.
func TestWebhooks(t *testing.T) {
	for _, k := range forge.Kinds {
		t.Run(string(k), func(t *testing.T) {
			repo := repoFor(k)
			fake := forgetest.New(t, k, repo, token)
			fake.SetHead(head, "c0ffee0000000000000000000000000000000002")
			f, _ := forges.Open(fake.Config())
			if _, err := f.CreatePullRequest(context.Background(), repo, forge.Publication{Head: head, Base: base, Title: "t"}); err != nil {
				t.Fatal(err)
			}
			h := forges.Hook(k)
			secret := []byte("hook-secret")
			wh := webhook(fake, "", "delivery-1", string(secret))
			if err := h.Verify(wh.Header, wh.Body, secret); err != nil {
				t.Fatalf("a signed delivery: %v", err)
			}
			d, err := h.Decode(wh.Header, wh.Body)
			if err != nil {
				t.Fatal(err)
			}
			if d.ID != "delivery-1" || d.Repo != repo || d.Number != 1 || d.Head != head || d.SHA != "c0ffee0000000000000000000000000000000002" || d.Ignored {
				t.Fatalf("delivery = %+v", d)
			}
			unsigned := webhook(fake, "", "delivery-2", "")
			if err := h.Verify(unsigned.Header, unsigned.Body, secret); !errors.Is(err, forge.ErrUnsigned) {
				t.Fatalf("unsigned: %v", err)
			}
			wrong := webhook(fake, "", "delivery-3", "another-secret")
			if err := h.Verify(wrong.Header, wrong.Body, secret); !errors.Is(err, forge.ErrBadSignature) {
				t.Fatalf("wrongly signed: %v", err)
			}
			if k != forge.GitLab { // GitLab signs nothing of the body: its token is a shared secret
				tampered := webhook(fake, "", "delivery-4", string(secret))
				tampered.Body = []byte(strings.Replace(string(tampered.Body), repo, "evil/app", 1))
				if err := h.Verify(tampered.Header, tampered.Body, secret); !errors.Is(err, forge.ErrBadSignature) {
					t.Fatalf("a body changed after signing: %v", err)
				}
			}
			if err := h.Verify(wh.Header, wh.Body, nil); err == nil {
				t.Fatal("verified with no secret")
			}
			bad := wh.Header.Clone()
			for _, n := range []string{"X-Github-Delivery", "X-Gitlab-Event-Uuid", "X-Gitea-Delivery"} {
				bad.Del(n)
			}
			if _, err := h.Decode(bad, wh.Body); !errors.Is(err, forge.ErrBadDelivery) {
				t.Fatalf("no delivery id: %v", err)
			}
		})
	}
}

func TestHookKinds(t *testing.T) {
	if forges.Hook("bitbucket") != nil {
		t.Fatal("a hook for an unknown kind")
	}
	if _, err := forges.Open(forge.Config{Kind: "bitbucket"}); err == nil {
		t.Fatal("opened an unknown kind")
	}
	_ = http.Header{}
}
