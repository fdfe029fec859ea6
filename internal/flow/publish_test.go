package flow

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParsePublish(t *testing.T) {
	src := `name: p
repo: /srv/r.git
runtime: demo
tasks: [{id: a, prompt: p}]
publish:
  pull_request: {forge: acme-github, repo: group/sub/app, base: main, title: "Add a", draft: true, on: partial,
    labels: [bot], reviewers: [alice], assignees: [bob]}
  iterate: {on: [checks_failed], max_rounds: 3, poll_interval: 45s, split: file, checks: [ci/test], prompt: "@prompt p.txt"}
`
	spec, err := Parse("p.yaml", []byte(src), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	want := &Publish{
		PullRequest: &PullRequestSpec{Forge: "acme-github", Repo: "group/sub/app", Base: "main", Title: "Add a", Draft: &yes,
			On: PublishOnPartial, Labels: []string{"bot"}, Reviewers: []string{"alice"}, Assignees: []string{"bob"}},
		Iterate: &IterateSpec{On: []string{IterateChecksFailed}, MaxRounds: 3, PollInterval: Duration(45 * time.Second),
			Split: SplitFile, Checks: []string{"ci/test"}, Prompt: "@prompt p.txt"},
	}
	if !reflect.DeepEqual(spec.Publish, want) {
		t.Fatalf("publish = %+v / %+v", spec.Publish.PullRequest, spec.Publish.Iterate)
	}
	if !want.Iterate.Iterates(IterateChecksFailed) || want.Iterate.Iterates(IterateChangesRequested) {
		t.Fatal("Iterates")
	}
}

// TestMergePublish: the flow's fields win one by one; the project's fill
// the rest; neither changes.
func TestMergePublish(t *testing.T) {
	no := false
	project := &Publish{PullRequest: &PullRequestSpec{Forge: "corp", Repo: "acme/app", Labels: []string{"drover"}, Draft: &no},
		Iterate: &IterateSpec{MaxRounds: 4, On: []string{IterateChecksFailed}}}
	yes := true
	flow := &Publish{PullRequest: &PullRequestSpec{Repo: "acme/other", Draft: &yes}, Iterate: &IterateSpec{PollInterval: Duration(time.Minute)}}
	got := MergePublish(flow, project)
	want := &Publish{PullRequest: &PullRequestSpec{Forge: "corp", Repo: "acme/other", Labels: []string{"drover"}, Draft: &yes},
		Iterate: &IterateSpec{MaxRounds: 4, On: []string{IterateChecksFailed}, PollInterval: Duration(time.Minute)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merged %+v %+v", got.PullRequest, got.Iterate)
	}
	got.PullRequest.Labels[0] = "changed"
	if project.PullRequest.Labels[0] != "drover" || flow.PullRequest.Forge != "" {
		t.Fatal("MergePublish changed its inputs")
	}
	if MergePublish(nil, nil) != nil || !reflect.DeepEqual(MergePublish(nil, project), project) {
		t.Fatal("MergePublish of nil")
	}
}

// TestDecodePublishJSON: a project's publish section is read with a flow's
// rules, its problems named from the config key.
func TestDecodePublishJSON(t *testing.T) {
	pub, err := DecodePublishJSON([]byte(`{"pull_request":{"forge":"corp"},"iterate":{"max_rounds":1}}`), "projects.app.publish")
	if err != nil || pub.PullRequest.Forge != "corp" || pub.Iterate.MaxRounds != 1 {
		t.Fatalf("%+v, %v", pub, err)
	}
	for in, want := range map[string]string{
		`{"pull_request":{"forge":"a b"}}`:  "projects.app.publish.pull_request.forge:",
		`{"iterate":{"on":["merged"]}}`:     `projects.app.publish.iterate.on[0]: "merged": want changes_requested or checks_failed`,
		`{"pull_requests":{}}`:              "projects.app.publish.pull_requests: unknown field (known fields: pull_request, iterate)",
		`{"pull_request":{"title":"a\nb"}}`: "projects.app.publish.pull_request.title:",
		`[`:                                 "invalid JSON",
	} {
		_, err := DecodePublishJSON([]byte(in), "projects.app.publish")
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", in, err, want)
		}
	}
}

func TestValidForgeRepo(t *testing.T) {
	for _, ok := range []string{"acme/app", "group/sub/app.js", "a_b/c-d"} {
		if err := ValidForgeRepo(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "app", "/acme/app", "acme/app/", "acme/../app", "acme/a pp", "acme//app"} {
		if ValidForgeRepo(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestDecodePublishJSONWhole: a publish section is one JSON value; what
// follows it is refused, not ignored.
func TestDecodePublishJSONWhole(t *testing.T) {
	_, err := DecodePublishJSON([]byte(`{"pull_request":{"forge":"corp"}} {"iterate":{}}`), "projects.app.publish")
	if err == nil || err.Error() != "invalid JSON: more after the publish section" {
		t.Errorf("trailing data: %v", err)
	}
}
