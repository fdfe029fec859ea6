package drover_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestChartProbesOutlastNATSStart checks the probes let a pod wait for NATS:
// on a fresh install the NATS pods are ready some 10s after Drover's, and a
// JetStream cluster elects its leader later still. Drover's processes serve
// /healthz from their start and keep /readyz failing until NATS, JetStream
// and their buckets answer (docs/metrics.md), so only /healthz may decide a
// restart: a startup or liveness probe on /readyz would restart pods that are
// waiting as they should, over and over.
func TestChartProbesOutlastNATSStart(t *testing.T) {
	m := render(t, "nats: {config: {cluster: {enabled: true}}}")
	sts := get[*appsv1.StatefulSet](t, m, "StatefulSet/"+fullname+"-controller")
	dep := get[*appsv1.Deployment](t, m, "Deployment/"+fullname+"-worker")
	for _, c := range []corev1.Container{
		container(t, sts.Spec.Template.Spec, "controller"),
		container(t, dep.Spec.Template.Spec, "worker"),
	} {
		checkProbes(t, c.Name, c, 8080)
		for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
				t.Errorf("%s: the %s probe restarts the pod on %+v; only /healthz may", c.Name, name, p)
			}
		}
		// The process serves HTTP before it opens anything (cmd/controller,
		// cmd/worker): the startup probe's budget is for the binary to start.
		if p := c.StartupProbe; p != nil && p.PeriodSeconds*p.FailureThreshold < 30 {
			t.Errorf("%s: startup probe gives %ds to serve /healthz", c.Name, p.PeriodSeconds*p.FailureThreshold)
		}
		// /readyz runs its checks within 3s (internal/telemetry): a longer
		// timeout lets a slow check answer 503 with its reason.
		if p := c.ReadinessProbe; p != nil && p.TimeoutSeconds <= 3 {
			t.Errorf("%s: readiness timeout %ds, not above /readyz's 3s budget", c.Name, p.TimeoutSeconds)
		}
		// A busy process can miss one liveness check; kill only after several.
		if p := c.LivenessProbe; p != nil && (p.FailureThreshold < 3 || p.TimeoutSeconds < 2) {
			t.Errorf("%s: liveness kills after %d failures of %ds", c.Name, p.FailureThreshold, p.TimeoutSeconds)
		}
	}
}
