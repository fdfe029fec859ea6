// Package drover_test renders the Helm chart in this directory with Helm's own
// library, decodes every object strictly into its Kubernetes API type, and checks
// what the cluster would run: one controller with its volume, configuration files
// Drover's loader accepts, probes, credentials that are referenced, never
// inlined, and pods that reach the NATS servers the NATS chart creates.
//
// The NATS chart is a dependency fetched by `helm dependency build`, which needs
// its chart repository; no registry reachable from the tests carries it. In its
// place the tests use testdata/nats-standin, a chart named nats written from the
// real chart's documented values schema: it evaluates every $tplYaml program in
// its values as that chart does, renders the Service, headless Service,
// StatefulSet and nats.conf that Drover's pods depend on, and the values it
// received (decoded strictly against that schema). DROVER_NATS_CHART names the
// real chart (a directory or .tgz) to run the NATS wiring and lint tests against
// it as well.
package drover_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	natsconf "github.com/nats-io/nats-server/v2/conf"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/queue"
)

const (
	releaseName = "prod"
	namespace   = "agents"
	// Names the chart gives a release called prod.
	fullname     = "prod-drover"
	natsFullname = "prod-nats"
	// standInDir is the stand-in for the NATS chart.
	standInDir = "testdata/nats-standin"
)

// manifest is one rendering of the chart.
type manifest struct {
	objs map[string]any // Drover's objects: "Kind/name", or "Kind/namespace/name" outside the release's namespace
	// natsObjs are the NATS chart's objects, keyed the same way.
	natsObjs map[string]any
	// nats is what the NATS stand-in received, with its $tplYaml programs
	// evaluated; nil when the subchart is off, absent or the real chart.
	nats  *natsValues
	notes string
}

// renderOpts say how to render.
type renderOpts struct {
	noSubchart bool   // render as if `helm dependency build` had not run
	natsChart  string // the NATS chart (a directory or .tgz); "" for the stand-in
}

// render renders the chart with values (YAML) over its defaults.
func render(t *testing.T, values string) *manifest {
	t.Helper()
	m, err := tryRender(t, values, renderOpts{})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return m
}

// renderErr renders values that the chart must refuse, and returns the error.
func renderErr(t *testing.T, values string) string {
	t.Helper()
	_, err := tryRender(t, values, renderOpts{})
	if err == nil {
		t.Fatalf("render succeeded, want an error for values:\n%s", values)
	}
	return err.Error()
}

func releaseOptions() chartutil.ReleaseOptions {
	return chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true}
}

// standIn loads the stand-in for the NATS chart.
func standIn(t *testing.T) *chart.Chart {
	t.Helper()
	return loadNATSChart(t, standInDir)
}

func loadNATSChart(t *testing.T, path string) *chart.Chart {
	t.Helper()
	c, err := loader.Load(path)
	if err != nil {
		t.Fatalf("load the NATS chart %s: %v", path, err)
	}
	if c.Name() != "nats" {
		t.Fatalf("%s is chart %s, not nats", path, c.Name())
	}
	return c
}

// natsCharts are the NATS charts a test runs against, by name: the stand-in,
// and the real chart when DROVER_NATS_CHART names it.
func natsCharts(t *testing.T) map[string]string {
	t.Helper()
	cs := map[string]string{"standin": ""}
	if p := os.Getenv("DROVER_NATS_CHART"); p != "" {
		cs["real-"+loadNATSChart(t, p).Metadata.Version] = p
	} else {
		t.Log("DROVER_NATS_CHART is not set: checked against the stand-in only")
	}
	return cs
}

func tryRender(t *testing.T, values string, o renderOpts) (*manifest, error) {
	t.Helper()
	chrt, err := loader.Load(".")
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	chrt.SetDependencies() // a charts/ directory from `helm dependency build` is not what is tested
	if !o.noSubchart {
		chrt.AddDependency(loadNATSChart(t, cmp.Or(o.natsChart, standInDir)))
	}
	vals, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("test values: %v", err)
	}
	if err := chartutil.ProcessDependenciesWithMerge(chrt, vals); err != nil {
		return nil, err
	}
	rv, err := chartutil.ToRenderValues(chrt, vals, releaseOptions(), chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	// Strict (a missing key is an error) but for the real NATS chart, which
	// relies on Helm's default of rendering it empty.
	out, err := engine.Engine{Strict: o.natsChart == ""}.Render(chrt, rv)
	if err != nil {
		return nil, err
	}
	m := &manifest{objs: map[string]any{}, natsObjs: map[string]any{}}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		content := out[name]
		objs := m.objs
		switch {
		case strings.HasSuffix(name, "NOTES.txt"):
			m.notes = content
			continue
		case strings.HasSuffix(name, ".tpl"):
			continue
		case strings.HasPrefix(name, "drover/charts/nats/"):
			objs = m.natsObjs
		}
		for _, doc := range releaseutil.SplitManifests(content) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			key, obj := decodeStrict(t, name, doc)
			if _, dup := objs[key]; dup {
				t.Fatalf("%s: %s rendered twice", name, key)
			}
			objs[key] = obj
		}
	}
	for key, o := range m.natsObjs {
		if cm, ok := o.(*corev1.ConfigMap); ok && strings.HasSuffix(key, "-standin-values") {
			m.nats = decodeNATSValues(t, cm.Data["values.json"])
			delete(m.natsObjs, key)
		}
	}
	return m, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// The kinds the charts may render, each decoded into its API type. KEDA's and
// the Prometheus Operator's types live in heavy modules; local structs cover
// the fields the chart sets (scaledObject, serviceMonitor below). The NATS
// chart adds a PodDisruptionBudget and its test Pod.
var kinds = map[string]func() any{
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                               func() any { return &corev1.Secret{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                       func() any { return &corev1.ServiceAccount{} },
	"v1/Pod":                                  func() any { return &corev1.Pod{} },
	"apps/v1/StatefulSet":                     func() any { return &appsv1.StatefulSet{} },
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"keda.sh/v1alpha1/ScaledObject":           func() any { return &scaledObject{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &serviceMonitor{} },
}

// decodeStrict decodes one document into its type, refusing unknown or
// duplicate fields, and returns its key: "Kind/name", or "Kind/namespace/name"
// when it names a namespace other than the release's.
func decodeStrict(t *testing.T, file, doc string) (string, any) {
	t.Helper()
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
		t.Fatalf("%s: %v\n%s", file, err, doc)
	}
	mk, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		t.Fatalf("%s: unexpected kind %s %s", file, tm.APIVersion, tm.Kind)
	}
	obj := mk()
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatalf("%s: strict decode of %s: %v\n%s", file, tm.Kind, err, doc)
	}
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	_ = yaml.Unmarshal([]byte(doc), &meta)
	if meta.Metadata.Name == "" {
		t.Fatalf("%s: %s without a name", file, tm.Kind)
	}
	return objKey(tm.Kind, meta.Metadata.Namespace, meta.Metadata.Name), obj
}

func objKey(kind, ns, name string) string {
	if ns == "" || ns == namespace {
		return kind + "/" + name
	}
	return kind + "/" + ns + "/" + name
}

// TestStrictDecoding checks the decoding the tests rely on refuses what
// Kubernetes would drop or reject: an unknown field, a field given twice.
func TestStrictDecoding(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec: {replica: 1}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\ndata: {c: d}\n",
	} {
		var obj any = &appsv1.StatefulSet{}
		if strings.Contains(doc, "ConfigMap") {
			obj = &corev1.ConfigMap{}
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err == nil {
			t.Errorf("decoded without an error:\n%s", doc)
		}
	}
}

func get[T any](t *testing.T, m *manifest, key string) T {
	t.Helper()
	o, ok := m.objs[key]
	if !ok {
		t.Fatalf("no %s rendered; have %v", key, m.keys())
	}
	v, ok := o.(T)
	if !ok {
		t.Fatalf("%s is a %T", key, o)
	}
	return v
}

func (m *manifest) keys() []string {
	k := make([]string, 0, len(m.objs))
	for key := range m.objs {
		k = append(k, key)
	}
	sort.Strings(k)
	return k
}

// scaledObject is the part of KEDA's keda.sh/v1alpha1 ScaledObject the chart sets.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32         `json:"minReplicaCount"`
		MaxReplicaCount *int32         `json:"maxReplicaCount"`
		PollingInterval *int32         `json:"pollingInterval"`
		CooldownPeriod  *int32         `json:"cooldownPeriod"`
		Advanced        map[string]any `json:"advanced"`
		Triggers        []struct {
			Type     string            `json:"type"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor the chart sets.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// natsValues is the NATS chart's values schema as the stand-in documents it
// (testdata/nats-standin/values.yaml, from the real chart's), plus `enabled`,
// which is Drover's. Decoded strictly, so a key Drover's chart sets that the
// NATS chart does not know fails here instead of being ignored there. Maps
// the NATS chart passes on as they are (merge, env, labels) are free-form.
type natsValues struct {
	Enabled           bool   `json:"enabled"`
	NameOverride      string `json:"nameOverride"`
	FullnameOverride  string `json:"fullnameOverride"`
	NamespaceOverride string `json:"namespaceOverride"`
	Global            struct {
		Image struct {
			PullPolicy      string   `json:"pullPolicy"`
			PullSecretNames []string `json:"pullSecretNames"`
			Registry        string   `json:"registry"`
		} `json:"image"`
		Labels map[string]string `json:"labels"`
		Drover map[string]any    `json:"drover"`
	} `json:"global"`
	TLSCA struct {
		Enabled       bool   `json:"enabled"`
		ConfigMapName string `json:"configMapName"`
		SecretName    string `json:"secretName"`
		Dir           string `json:"dir"`
		Key           string `json:"key"`
	} `json:"tlsCA"`
	Config struct {
		Cluster struct {
			Enabled     bool           `json:"enabled"`
			Port        int            `json:"port"`
			Replicas    int            `json:"replicas"`
			NoAdvertise bool           `json:"noAdvertise"`
			Merge       map[string]any `json:"merge"`
			Patch       []any          `json:"patch"`
		} `json:"cluster"`
		JetStream struct {
			Enabled   bool `json:"enabled"`
			FileStore struct {
				Enabled bool   `json:"enabled"`
				Dir     string `json:"dir"`
				PVC     struct {
					Enabled          bool           `json:"enabled"`
					Size             string         `json:"size"`
					StorageClassName string         `json:"storageClassName"`
					Merge            map[string]any `json:"merge"`
					Patch            []any          `json:"patch"`
					Name             string         `json:"name"`
				} `json:"pvc"`
			} `json:"fileStore"`
			MemoryStore struct {
				Enabled bool   `json:"enabled"`
				MaxSize string `json:"maxSize"`
			} `json:"memoryStore"`
			Merge struct {
				SyncInterval string `json:"sync_interval"`
			} `json:"merge"`
			Patch []any `json:"patch"`
		} `json:"jetstream"`
		NATS struct {
			Port int `json:"port"`
			TLS  struct {
				Enabled    bool           `json:"enabled"`
				SecretName string         `json:"secretName"`
				Dir        string         `json:"dir"`
				Cert       string         `json:"cert"`
				Key        string         `json:"key"`
				Merge      map[string]any `json:"merge"`
				Patch      []any          `json:"patch"`
			} `json:"tls"`
		} `json:"nats"`
		Monitor struct {
			Enabled bool `json:"enabled"`
			Port    int  `json:"port"`
			TLS     struct {
				Enabled bool `json:"enabled"`
			} `json:"tls"`
		} `json:"monitor"`
		ServerNamePrefix string `json:"serverNamePrefix"`
		Merge            struct {
			Authorization *struct {
				Users []struct {
					User        string         `json:"user"`
					Password    string         `json:"password"`
					Permissions map[string]any `json:"permissions"`
				} `json:"users"`
			} `json:"authorization"`
		} `json:"merge"`
		Patch []any `json:"patch"`
	} `json:"config"`
	Container struct {
		// The chart's env map: name -> EnvVar without its name.
		Env   map[string]corev1.EnvVar `json:"env"`
		Merge map[string]any           `json:"merge"`
		Patch []any                    `json:"patch"`
	} `json:"container"`
	Service struct {
		Enabled bool `json:"enabled"`
		Ports   struct {
			NATS    struct{ Enabled bool } `json:"nats"`
			Monitor struct{ Enabled bool } `json:"monitor"`
		} `json:"ports"`
		Merge map[string]any `json:"merge"`
		Patch []any          `json:"patch"`
		Name  string         `json:"name"`
	} `json:"service"`
	HeadlessService struct {
		Merge map[string]any `json:"merge"`
		Patch []any          `json:"patch"`
		Name  string         `json:"name"`
	} `json:"headlessService"`
	ConfigMap struct {
		Name string `json:"name"`
	} `json:"configMap"`
	StatefulSet struct {
		Name string `json:"name"`
	} `json:"statefulSet"`
	NatsBox struct {
		Enabled bool `json:"enabled"`
	} `json:"natsBox"`
}

// decodeNATSValues decodes the values the stand-in received, its $tplYaml
// programs evaluated, strictly.
func decodeNATSValues(t *testing.T, evaluated string) *natsValues {
	t.Helper()
	var v natsValues
	dec := json.NewDecoder(bytes.NewReader([]byte(evaluated)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("values handed to the NATS chart: %v\n%s", err, evaluated)
	}
	return &v
}

// checkPods runs the checks every pod template must pass: volumes exist for
// every mount, no variable twice, no service-account token, and credentials
// only ever from Secrets.
func checkPods(t *testing.T, m *manifest) {
	t.Helper()
	for key, o := range m.objs {
		var spec *corev1.PodSpec
		switch x := o.(type) {
		case *appsv1.StatefulSet:
			spec = &x.Spec.Template.Spec
		case *appsv1.Deployment:
			spec = &x.Spec.Template.Spec
		default:
			continue
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: the service account token is mounted", key)
		}
		vols := map[string]bool{}
		for _, v := range spec.Volumes {
			vols[v.Name] = true
		}
		if sts, ok := o.(*appsv1.StatefulSet); ok {
			for _, c := range sts.Spec.VolumeClaimTemplates {
				vols[c.Name] = true
			}
		}
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			for _, vm := range c.VolumeMounts {
				if !vols[vm.Name] {
					t.Errorf("%s: container %s mounts volume %q, which the pod does not have", key, c.Name, vm.Name)
				}
			}
			seen := map[string]bool{}
			for _, e := range c.Env {
				if seen[e.Name] {
					t.Errorf("%s: container %s sets %s twice", key, c.Name, e.Name)
				}
				seen[e.Name] = true
				if looksSecret(e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
					t.Errorf("%s: container %s: %s is not read from a Secret: %+v", key, c.Name, e.Name, e)
				}
				if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && (r.SecretKeyRef.Name == "" || r.SecretKeyRef.Key == "") {
					t.Errorf("%s: container %s: %s references no Secret key: %+v", key, c.Name, e.Name, r.SecretKeyRef)
				}
			}
		}
	}
}

var secretName = regexp.MustCompile(`(?i)(KEY|TOKEN|PASSWORD|SECRET|CREDENTIAL|CREDS|NKEY)`)

// looksSecret says whether a variable holds a credential (a *_FILE variable
// holds a path to one).
func looksSecret(name string) bool {
	return secretName.MatchString(name) && !strings.HasSuffix(name, "_FILE")
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

func env(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// loadConfig parses the config file a pod gets with Drover's own loader, with
// the environment of its container: literal values as given, fields of the
// pod and secrets as samples, and files mounted from Secrets as sample files,
// so every DROVER_* variable the chart sets must be one the loader knows.
func loadConfig(t *testing.T, cm *corev1.ConfigMap, key string, c corev1.Container) *config.Config {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "DROVER_") {
			t.Setenv(k, "")
		}
	}
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "DROVER_") || e.Name == "DROVER_CONFIG" {
			continue
		}
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			t.Setenv(e.Name, fullname+"-worker-6b7f9c5d4-xk2pq")
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			t.Setenv(e.Name, "sample-secret-value")
		case e.ValueFrom == nil && strings.HasSuffix(e.Name, "_FILE"):
			// A file mounted from a Secret: the loader checks it is readable.
			sample := filepath.Join(t.TempDir(), filepath.Base(e.Value))
			if err := os.WriteFile(sample, []byte("sample\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv(e.Name, sample)
		case e.ValueFrom == nil:
			t.Setenv(e.Name, e.Value)
		default:
			t.Fatalf("%s: no sample for %+v", e.Name, e.ValueFrom)
		}
	}
	data, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s", cm.Name, key)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{File: file})
	if err != nil {
		t.Fatalf("%s does not load: %v\n%s", key, err, data)
	}
	return cfg
}

// configFile checks that the pod reads key of the ConfigMap through
// DROVER_CONFIG and returns the config it gets.
func configFile(t *testing.T, m *manifest, spec corev1.PodSpec, cname, key string) *config.Config {
	t.Helper()
	c := container(t, spec, cname)
	e, _ := env(c, "DROVER_CONFIG")
	dir, file := filepath.Split(e.Value)
	var vol string
	for _, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == filepath.Clean(dir) {
			vol = vm.Name
		}
	}
	cm := get[*corev1.ConfigMap](t, m, "ConfigMap/"+fullname+"-config")
	found := false
	for _, v := range spec.Volumes {
		if v.Name == vol && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
			for _, it := range v.ConfigMap.Items {
				found = found || it.Key == key && it.Path == file
			}
		}
	}
	if !found {
		t.Fatalf("%s: DROVER_CONFIG=%q is not %s of ConfigMap %s", cname, e.Value, key, cm.Name)
	}
	return loadConfig(t, cm, key, c)
}

// mountedAt returns the volume mounted at path or above it in c.
func mountedAt(t *testing.T, spec corev1.PodSpec, c corev1.Container, path string) (corev1.VolumeMount, corev1.Volume) {
	t.Helper()
	var best corev1.VolumeMount
	for _, vm := range c.VolumeMounts {
		if (path == vm.MountPath || strings.HasPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/")) && len(vm.MountPath) > len(best.MountPath) {
			best = vm
		}
	}
	if best.Name == "" {
		t.Fatalf("container %s: nothing is mounted at %s", c.Name, path)
	}
	for _, v := range spec.Volumes {
		if v.Name == best.Name {
			return best, v
		}
	}
	return best, corev1.Volume{Name: best.Name} // a volumeClaimTemplate
}

func checkProbes(t *testing.T, what string, c corev1.Container, port int) {
	t.Helper()
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no %s probe", what, p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("%s: %s probe %s on %s, want %s on http", what, p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}
	ok := false
	for _, cp := range c.Ports {
		ok = ok || cp.Name == "http" && int(cp.ContainerPort) == port
	}
	if !ok {
		t.Errorf("%s: no port http %d: %+v", what, port, c.Ports)
	}
}

func httpPort(t *testing.T, cfg *config.Config) int {
	t.Helper()
	_, p, _ := strings.Cut(cfg.HTTP.Listen, ":")
	n, err := strconv.Atoi(p)
	if err != nil || cfg.HTTP.Listen != ":"+p {
		t.Fatalf("http.listen %q is not :PORT", cfg.HTTP.Listen)
	}
	return n
}

// TestChartDependency checks the NATS chart is declared as an optional dependency.
func TestChartDependency(t *testing.T) {
	chrt, err := loader.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(chrt.Metadata.Dependencies); n != 1 {
		t.Fatalf("%d dependencies", n)
	}
	d := chrt.Metadata.Dependencies[0]
	if d.Name != "nats" || d.Repository != "https://nats-io.github.io/k8s/helm/charts/" || d.Condition != "nats.enabled" {
		t.Errorf("dependency %+v", d)
	}
	if !chartutil.IsCompatibleRange(d.Version, standIn(t).Metadata.Version) {
		t.Errorf("the stand-in's version is outside %s", d.Version)
	}
	for _, f := range chrt.Files {
		if strings.HasSuffix(f.Name, ".go") || strings.HasPrefix(f.Name, "testdata/") {
			t.Errorf("%s would be packaged with the chart (.helmignore)", f.Name)
		}
	}
}

// TestChartDefaults renders the default values: the NATS subchart with auth,
// one controller, two workers.
func TestChartDefaults(t *testing.T) {
	m := render(t, "")
	want := []string{
		"ConfigMap/" + fullname + "-config",
		"Deployment/" + fullname + "-worker",
		"Secret/" + releaseName + "-drover-nats-auth",
		"Service/" + fullname + "-controller",
		"ServiceAccount/" + fullname,
		"StatefulSet/" + fullname + "-controller",
	}
	if got := m.keys(); !slices.Equal(got, want) {
		t.Errorf("objects %v, want %v", got, want)
	}
	checkPods(t, m)

	// One controller, the single writer of its volume.
	sts := get[*appsv1.StatefulSet](t, m, "StatefulSet/"+fullname+"-controller")
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
		t.Errorf("controller replicas %v, want 1", sts.Spec.Replicas)
	}
	if sts.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement || sts.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
		t.Errorf("controller policy %s, update %s", sts.Spec.PodManagementPolicy, sts.Spec.UpdateStrategy.Type)
	}
	if sts.Spec.ServiceName != fullname+"-controller" {
		t.Errorf("serviceName %q", sts.Spec.ServiceName)
	}
	if n := len(sts.Spec.VolumeClaimTemplates); n != 1 {
		t.Fatalf("%d volumeClaimTemplates", n)
	}
	pvc := sts.Spec.VolumeClaimTemplates[0]
	if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) ||
		pvc.Spec.Resources.Requests.Storage().String() != "10Gi" || pvc.Spec.StorageClassName != nil {
		t.Errorf("controller PVC %+v", pvc.Spec)
	}
	ctl := container(t, sts.Spec.Template.Spec, "controller")
	if !slices.Equal(ctl.Args, []string{"controller", "serve"}) {
		t.Errorf("controller args %v", ctl.Args)
	}
	ccfg := configFile(t, m, sts.Spec.Template.Spec, "controller", "controller.yaml")
	if vm, _ := mountedAt(t, sts.Spec.Template.Spec, ctl, filepath.Join(ccfg.DataDir, "state")); vm.Name != pvc.Name || vm.MountPath != ccfg.DataDir {
		t.Errorf("data_dir %s is on %+v, want the PVC %s", ccfg.DataDir, vm, pvc.Name)
	}
	if ccfg.NATS.URL != "nats://"+natsFullname+":4222" || ccfg.NATS.Replicas != 1 {
		t.Errorf("controller nats %+v", ccfg.NATS)
	}
	// The loader reads the credentials the pod's environment carries.
	if ccfg.NATS.User != "controller" || string(ccfg.NATS.Password) != "sample-secret-value" {
		t.Errorf("controller NATS credentials: user %q, password set %v", ccfg.NATS.User, ccfg.NATS.Password != "")
	}
	port := httpPort(t, ccfg)
	checkProbes(t, "controller", ctl, port)
	svc := get[*corev1.Service](t, m, "Service/"+fullname+"-controller")
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(sts.Spec.Template.Labels)) || svc.Spec.Ports[0].Port != int32(port) {
		t.Errorf("controller Service %+v does not reach the pod", svc.Spec)
	}

	// Workers.
	dep := get[*appsv1.Deployment](t, m, "Deployment/"+fullname+"-worker")
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("worker replicas %v", dep.Spec.Replicas)
	}
	spec := dep.Spec.Template.Spec
	wc := container(t, spec, "worker")
	if !slices.Equal(wc.Args, []string{"worker", "run"}) {
		t.Errorf("worker args %v", wc.Args)
	}
	wcfg := configFile(t, m, spec, "worker", "worker.yaml")
	if wcfg.NATS.User != "worker" || wcfg.NATS.Password == "" {
		t.Errorf("worker NATS user %q, password set %v", wcfg.NATS.User, wcfg.NATS.Password != "")
	}
	if wcfg.NATS.URL != ccfg.NATS.URL || wcfg.Worker.Pool != "default" || wcfg.Worker.Slots != 2 ||
		wcfg.Worker.ID != fullname+"-worker-6b7f9c5d4-xk2pq" {
		t.Errorf("worker config nats %+v worker %+v", wcfg.NATS, wcfg.Worker)
	}
	if _, v := mountedAt(t, spec, wc, wcfg.Worker.WorkDir); v.EmptyDir == nil {
		t.Errorf("work_dir %s is on %+v, want an emptyDir", wcfg.Worker.WorkDir, v)
	}
	for _, dir := range []string{"/home/drover", "/tmp"} {
		if _, v := mountedAt(t, spec, wc, dir); v.EmptyDir == nil {
			t.Errorf("%s is on %+v, want an emptyDir (read-only root)", dir, v)
		}
	}
	checkProbes(t, "worker", wc, httpPort(t, wcfg))
	// Kubernetes waits for the drain (Drover's default 30s) before SIGKILL.
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g < 45 {
		t.Errorf("worker terminationGracePeriodSeconds %v", g)
	}
	if _, ok := env(wc, "DROVER_WORKER_DRAIN_TIMEOUT"); ok {
		t.Error("DROVER_WORKER_DRAIN_TIMEOUT set by default")
	}
	for _, c := range []corev1.Container{ctl, wc} {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s security context %+v", c.Name, sc)
		}
	}

	// NATS: the subchart with JetStream on file storage, fsync always,
	// monitoring on, one server, and Drover's users wired to one Secret.
	n := m.nats
	if n == nil {
		t.Fatal("the NATS subchart is not rendered")
	}
	if !n.Config.JetStream.Enabled || !n.Config.JetStream.FileStore.Enabled || !n.Config.JetStream.FileStore.PVC.Enabled {
		t.Errorf("jetstream %+v", n.Config.JetStream)
	}
	if n.Config.JetStream.Merge.SyncInterval != "always" {
		t.Errorf("sync_interval %q, want always", n.Config.JetStream.Merge.SyncInterval)
	}
	if !n.Config.Monitor.Enabled || n.Config.Monitor.Port != 8222 {
		t.Errorf("monitor %+v", n.Config.Monitor)
	}
	if n.Config.Cluster.Enabled || n.NatsBox.Enabled {
		t.Errorf("cluster %+v natsBox %+v", n.Config.Cluster, n.NatsBox)
	}
	checkNATSAuth(t, m, "Secret/"+releaseName+"-drover-nats-auth", ctl, wc)
	// The users get the least-privilege roles of docs/security.md, exactly
	// as the example permissions file the secure e2e test runs with.
	b, err := os.ReadFile("../../examples/nats/permissions.conf")
	if err != nil {
		t.Fatal(err)
	}
	roles, err := natsconf.Parse(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range n.Config.Merge.Authorization.Users {
		want := roles["DROVER_"+strings.ToUpper(u.User)]
		if fmt.Sprint(sortLists(normalize(u.Permissions))) != fmt.Sprint(sortLists(normalize(want))) {
			t.Errorf("NATS user %s: permissions\n%v\nwant those of examples/nats/permissions.conf:\n%v", u.User, u.Permissions, want)
		}
	}
	if strings.Contains(m.notes, "may publish anything") {
		t.Errorf("NOTES warn about wide permissions:\n%s", m.notes)
	}
}

// sortLists sorts every list of strings in v, for comparing permissions
// whose order does not matter.
func sortLists(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = sortLists(e)
		}
	case []any:
		sort.Slice(v, func(i, j int) bool { return fmt.Sprint(v[i]) < fmt.Sprint(v[j]) })
	}
	return v
}

// normalize makes decoded YAML, JSON and NATS configuration values comparable:
// lists of anything as []any, maps as map[string]any.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalize(e)
		}
		return out
	case []string:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = e
		}
		return out
	}
	return v
}

// checkNATSAuth follows each role's password from its pod to the Secret and
// from the Secret to the NATS server's authorization block.
func checkNATSAuth(t *testing.T, m *manifest, secretKey string, ctl, wc corev1.Container) {
	t.Helper()
	var secret *corev1.Secret
	if o, ok := m.objs[secretKey]; ok {
		secret = o.(*corev1.Secret)
	}
	users := map[string]string{} // user -> password expression
	if a := m.nats.Config.Merge.Authorization; a != nil {
		for _, u := range a.Users {
			users[u.User] = u.Password
			if len(u.Permissions) == 0 {
				t.Errorf("NATS user %s has no permissions", u.User)
			}
		}
	}
	if len(users) != 2 {
		t.Fatalf("NATS users %v, want controller and worker", users)
	}
	for role, c := range map[string]corev1.Container{"controller": ctl, "worker": wc} {
		user, _ := env(c, "DROVER_NATS_USER")
		pw, _ := env(c, "DROVER_NATS_PASSWORD")
		if user.Value != role || pw.ValueFrom == nil || pw.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s: DROVER_NATS_USER %+v DROVER_NATS_PASSWORD %+v", role, user, pw)
			continue
		}
		ref := pw.ValueFrom.SecretKeyRef
		expr, ok := users[role]
		varName, isVar := strings.CutPrefix(strings.TrimSuffix(strings.TrimPrefix(expr, "<< "), " >>"), "$")
		if !ok || !isVar || !strings.HasPrefix(expr, "<< $") {
			t.Errorf("NATS user %s: password %q, want << $VARIABLE >>", role, expr)
			continue
		}
		ne, ok := m.nats.Container.Env[varName]
		if !ok || ne.ValueFrom == nil || ne.ValueFrom.SecretKeyRef == nil || *ne.ValueFrom.SecretKeyRef != *ref {
			t.Errorf("NATS server's %s is %+v, want the %s pod's %+v", varName, ne, role, ref)
		}
		if secret != nil {
			if secret.Name != ref.Name || len(secret.Data[ref.Key]) < 32 {
				t.Errorf("%s's password %s/%s is not in Secret %s (%d bytes)", role, ref.Name, ref.Key, secret.Name, len(secret.Data[ref.Key]))
			}
		}
	}
}

// TestChartWithoutSubchart renders the chart as it is before `helm dependency
// build`: Drover's objects alone.
func TestChartWithoutSubchart(t *testing.T) {
	m, err := tryRender(t, "", renderOpts{noSubchart: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.nats != nil {
		t.Error("NATS values rendered without the subchart")
	}
	checkPods(t, m)
	get[*appsv1.StatefulSet](t, m, "StatefulSet/"+fullname+"-controller")
}

// TestChartNATSCluster turns the subchart into a 3-server JetStream cluster:
// Drover's streams get 3 replicas.
func TestChartNATSCluster(t *testing.T) {
	m := render(t, "nats: {config: {cluster: {enabled: true}}}")
	if c := m.nats.Config.Cluster; !c.Enabled || c.Replicas != 3 {
		t.Errorf("cluster %+v", c)
	}
	for _, key := range []string{"controller.yaml", "worker.yaml"} {
		cm := get[*corev1.ConfigMap](t, m, "ConfigMap/"+fullname+"-config")
		cfg := loadConfig(t, cm, key, corev1.Container{})
		if cfg.NATS.Replicas != 3 {
			t.Errorf("%s: nats.replicas %d, want 3", key, cfg.NATS.Replicas)
		}
	}
	for values, want := range map[string]string{
		"nats: {config: {cluster: {enabled: true, replicas: 2}}}":       "at least 3 servers",
		"nats: {config: {cluster: {enabled: true}}}\nstreamReplicas: 5": "more than the 3 NATS servers",
		"streamReplicas: 3": "need nats.config.cluster.enabled",
		"nats: {config: {cluster: {enabled: true, replicas: 5}}}\nstreamReplicas: 6": "1..5",
	} {
		if err := renderErr(t, values); !strings.Contains(err, want) {
			t.Errorf("%s: error %q, want %q", values, err, want)
		}
	}
}

// TestChartExternalNATS uses an existing NATS: no subchart, no generated
// Secret, and each role's credentials referenced from the user's Secrets.
func TestChartExternalNATS(t *testing.T) {
	m := render(t, `
nats: {enabled: false}
streamReplicas: 3
externalNats:
  url: tls://nats.messaging.svc:4222
  tls: {secretName: nats-ca, caKey: ca.crt}
  controller:
    user: drover-controller
    passwordSecret: {name: nats-controller, key: password}
  worker:
    credsSecret: {name: nats-worker-creds, key: worker.creds}
`)
	if m.nats != nil {
		t.Error("the NATS subchart is rendered with nats.enabled=false")
	}
	for _, k := range m.keys() {
		if strings.HasPrefix(k, "Secret/") {
			t.Errorf("%s rendered: the chart must not create credentials for an external NATS", k)
		}
	}
	checkPods(t, m)
	sts := get[*appsv1.StatefulSet](t, m, "StatefulSet/"+fullname+"-controller")
	dep := get[*appsv1.Deployment](t, m, "Deployment/"+fullname+"-worker")
	ctl, wc := container(t, sts.Spec.Template.Spec, "controller"), container(t, dep.Spec.Template.Spec, "worker")
	for _, cfg := range []*config.Config{
		configFile(t, m, sts.Spec.Template.Spec, "controller", "controller.yaml"),
		configFile(t, m, dep.Spec.Template.Spec, "worker", "worker.yaml"),
	} {
		if cfg.NATS.URL != "tls://nats.messaging.svc:4222" || cfg.NATS.Replicas != 3 {
			t.Errorf("nats %+v", cfg.NATS)
		}
	}

	// The controller: a user and a password from its Secret.
	if e, _ := env(ctl, "DROVER_NATS_USER"); e.Value != "drover-controller" {
		t.Errorf("controller DROVER_NATS_USER %+v", e)
	}
	if e, _ := env(ctl, "DROVER_NATS_PASSWORD"); e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != "nats-controller" || e.ValueFrom.SecretKeyRef.Key != "password" {
		t.Errorf("controller DROVER_NATS_PASSWORD %+v", e)
	}
	if _, ok := env(ctl, "DROVER_NATS_CREDS_FILE"); ok {
		t.Error("the controller got the workers' creds file")
	}
	// The workers: a creds file mounted from their Secret.
	checkFileFromSecret(t, dep.Spec.Template.Spec, wc, "DROVER_NATS_CREDS_FILE", "nats-worker-creds", "worker.creds")
	if _, ok := env(wc, "DROVER_NATS_PASSWORD"); ok {
		t.Error("the workers got a password")
	}
	// Both: the CA.
	checkFileFromSecret(t, sts.Spec.Template.Spec, ctl, "DROVER_NATS_TLS_CA_FILE", "nats-ca", "ca.crt")
	checkFileFromSecret(t, dep.Spec.Template.Spec, wc, "DROVER_NATS_TLS_CA_FILE", "nats-ca", "ca.crt")

	for values, want := range map[string]string{
		"nats: {enabled: false}":                                           "externalNats.url: set it",
		"externalNats: {url: nats://x:4222}":                               "pick one",
		"nats: {enabled: false}\nexternalNats: {url: 'nats.example:4222'}": "must be a URL",
		"nats: {enabled: false}\nexternalNats: {url: 'nats://n:4222', worker: {user: w, passwordSecret: {name: a}, credsSecret: {name: b}}}": "set one of",
		"nats: {enabled: false}\nexternalNats: {url: 'nats://n:4222', worker: {passwordSecret: {name: a}}}":                                  "worker.user: required",
	} {
		if err := renderErr(t, values); !strings.Contains(err, want) {
			t.Errorf("%s: error %q, want %q", values, err, want)
		}
	}
}

// checkFileFromSecret checks that variable names a file that is key of Secret
// secret, mounted read-only.
func checkFileFromSecret(t *testing.T, spec corev1.PodSpec, c corev1.Container, variable, secret, key string) {
	t.Helper()
	e, ok := env(c, variable)
	if !ok || e.Value == "" {
		t.Errorf("%s: no %s", c.Name, variable)
		return
	}
	vm, v := mountedAt(t, spec, c, e.Value)
	rel := strings.TrimPrefix(e.Value, strings.TrimSuffix(vm.MountPath, "/")+"/")
	if v.Secret == nil || v.Secret.SecretName != secret || !vm.ReadOnly {
		t.Errorf("%s: %s=%s is on %+v (%+v), want Secret %s read-only", c.Name, variable, e.Value, v, vm, secret)
		return
	}
	if len(v.Secret.Items) == 0 {
		if rel != key {
			t.Errorf("%s: %s=%s is not key %s of the Secret", c.Name, variable, e.Value, key)
		}
		return
	}
	found := false
	for _, it := range v.Secret.Items {
		found = found || it.Key == key && it.Path == rel
	}
	if !found {
		t.Errorf("%s: %s=%s is not key %s of Secret %s: %+v", c.Name, variable, e.Value, key, secret, v.Secret.Items)
	}
}

// TestChartKEDA scales the workers on their attempt consumers' lag.
func TestChartKEDA(t *testing.T) {
	m := render(t, `
keda: {enabled: true, runtimes: [claude-code, codex], minReplicaCount: 0}
worker: {pool: gpu, slots: 3, runtimes: [claude-code, codex]}
global: {drover: {natsAuth: {workerConsumers: [{pool: gpu, runtimes: [claude-code, codex]}]}}}
`)
	checkPods(t, m)
	// The worker role may use exactly the gpu pool's consumers.
	for _, u := range m.nats.Config.Merge.Authorization.Users {
		if u.User != "worker" {
			continue
		}
		allow := fmt.Sprint(u.Permissions["publish"])
		for _, want := range []string{"$JS.API.CONSUMER.MSG.NEXT.DROVER_ATTEMPTS.attempts_gpu_codex",
			"$JS.ACK.DROVER_ATTEMPTS.attempts_gpu_claude-code.>",
			"$JS.API.CONSUMER.CREATE.DROVER_ATTEMPTS.attempts_gpu_codex.drover.attempts.gpu.codex"} {
			if !strings.Contains(allow, want) {
				t.Errorf("worker permissions lack %s: %s", want, allow)
			}
		}
		if strings.Contains(allow, "attempts_default_") {
			t.Errorf("worker permissions name the default pool: %s", allow)
		}
	}
	dep := get[*appsv1.Deployment](t, m, "Deployment/"+fullname+"-worker")
	if dep.Spec.Replicas != nil {
		t.Errorf("the Deployment sets replicas %d: it would fight KEDA", *dep.Spec.Replicas)
	}
	so := get[*scaledObject](t, m, "ScaledObject/"+fullname+"-worker")
	if r := so.Spec.ScaleTargetRef; r.Kind != "Deployment" || r.Name != dep.Name {
		t.Errorf("scaleTargetRef %+v", r)
	}
	if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount != 0 || so.Spec.MaxReplicaCount == nil || *so.Spec.MaxReplicaCount != 10 {
		t.Errorf("replica counts %v..%v", so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount)
	}
	endpoint := fmt.Sprintf("%s-headless.%s.svc.cluster.local:%d", natsFullname, namespace, m.nats.Config.Monitor.Port)
	var consumers []string
	for _, tr := range so.Spec.Triggers {
		md := tr.Metadata
		if tr.Type != "nats-jetstream" || md["stream"] != queue.AttemptsStream || md["natsServerMonitoringEndpoint"] != endpoint ||
			md["account"] != "$G" || md["lagThreshold"] != "3" {
			t.Errorf("trigger %+v", tr)
		}
		consumers = append(consumers, md["consumer"])
	}
	if want := []string{queue.AttemptConsumerName("gpu", "claude-code"), queue.AttemptConsumerName("gpu", "codex")}; !slices.Equal(consumers, want) {
		t.Errorf("consumers %v, want %v", consumers, want)
	}
	if !m.nats.Config.Monitor.Enabled {
		t.Error("KEDA reads the monitoring endpoint, which is off")
	}

	// An external NATS: its monitoring endpoint must be given.
	m = render(t, `
nats: {enabled: false}
externalNats: {url: nats://nats.messaging:4222, monitoringEndpoint: nats-headless.messaging.svc.cluster.local:8222}
keda: {enabled: true}
worker: {runtimes: [demo]}
`)
	so = get[*scaledObject](t, m, "ScaledObject/"+fullname+"-worker")
	if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Metadata["natsServerMonitoringEndpoint"] != "nats-headless.messaging.svc.cluster.local:8222" ||
		so.Spec.Triggers[0].Metadata["consumer"] != queue.AttemptConsumerName("default", "demo") || so.Spec.Triggers[0].Metadata["lagThreshold"] != "2" {
		t.Errorf("triggers %+v", so.Spec.Triggers)
	}
	for values, want := range map[string]string{
		"keda: {enabled: true}": "keda.runtimes",
		"nats: {enabled: false}\nexternalNats: {url: nats://n:4222}\nkeda: {enabled: true, runtimes: [demo]}": "externalNats.monitoringEndpoint",
	} {
		if err := renderErr(t, values); !strings.Contains(err, want) {
			t.Errorf("%s: error %q, want %q", values, err, want)
		}
	}
}

// TestChartServiceMonitor scrapes the controller and the workers.
func TestChartServiceMonitor(t *testing.T) {
	m := render(t, "serviceMonitor: {enabled: true, labels: {release: prometheus}}")
	sm := get[*serviceMonitor](t, m, "ServiceMonitor/"+fullname)
	if sm.Labels["release"] != "prometheus" || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor %+v", sm)
	}
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, svcName := range []string{fullname + "-controller", fullname + "-worker"} {
		svc := get[*corev1.Service](t, m, "Service/"+svcName)
		if !sel.Matches(labels.Set(svc.Labels)) || svc.Spec.Ports[0].Name != "http" {
			t.Errorf("ServiceMonitor does not select Service %s (%v)", svcName, svc.Labels)
		}
	}
	dep := get[*appsv1.Deployment](t, m, "Deployment/"+fullname+"-worker")
	if svc := get[*corev1.Service](t, m, "Service/"+fullname+"-worker"); !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("the worker Service does not select the worker pods")
	}
	if n := len(m.keys()); n != 8 {
		t.Errorf("%d objects: %v", n, m.keys())
	}
}

// TestChartWorkers covers the work dir choices, the CLI installer, API keys
// and the drain timeout.
func TestChartWorkers(t *testing.T) {
	m := render(t, `
worker:
  workDir: {type: ephemeral, ephemeral: {size: 100Gi, storageClassName: fast}}
  drainTimeoutSeconds: 60
  terminationGracePeriodSeconds: 90
  runtimes: [claude-code]
  apiKeys:
    - {name: ANTHROPIC_API_KEY, secretName: llm-keys, key: anthropic}
  envFromSecrets: [more-keys]
  cliInstall: {enabled: true, packages: ["@anthropic-ai/claude-code@2.0.0"]}
`)
	checkPods(t, m)
	dep := get[*appsv1.Deployment](t, m, "Deployment/"+fullname+"-worker")
	spec := dep.Spec.Template.Spec
	wc := container(t, spec, "worker")
	cfg := configFile(t, m, spec, "worker", "worker.yaml")
	if !slices.Equal(cfg.Worker.Runtimes, []string{"claude-code"}) {
		t.Errorf("worker.runtimes %v", cfg.Worker.Runtimes)
	}
	if _, v := mountedAt(t, spec, wc, cfg.Worker.WorkDir); v.Ephemeral == nil || v.Ephemeral.VolumeClaimTemplate == nil ||
		v.Ephemeral.VolumeClaimTemplate.Spec.Resources.Requests.Storage().String() != "100Gi" ||
		*v.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName != "fast" {
		t.Errorf("work dir on %+v", v)
	}
	if e, _ := env(wc, "DROVER_WORKER_DRAIN_TIMEOUT"); e.Value != "60s" {
		t.Errorf("DROVER_WORKER_DRAIN_TIMEOUT %+v", e)
	}
	if e, _ := env(wc, "ANTHROPIC_API_KEY"); e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "llm-keys" {
		t.Errorf("ANTHROPIC_API_KEY %+v", e)
	}
	if len(wc.EnvFrom) != 1 || wc.EnvFrom[0].SecretRef == nil || wc.EnvFrom[0].SecretRef.Name != "more-keys" {
		t.Errorf("envFrom %+v", wc.EnvFrom)
	}
	// The installer puts the CLIs and node in a volume the worker has first in PATH.
	ic := container(t, spec, "install-clis")
	if !slices.Equal(ic.Args, []string{"@anthropic-ai/claude-code@2.0.0"}) || !strings.Contains(strings.Join(ic.Command, " "), "--prefix /opt/drover-clis") {
		t.Errorf("installer %v %v", ic.Command, ic.Args)
	}
	_, iv := mountedAt(t, spec, ic, "/opt/drover-clis/bin")
	_, wv := mountedAt(t, spec, wc, "/opt/drover-clis/bin")
	if iv.Name != wv.Name || iv.EmptyDir == nil {
		t.Errorf("installer writes to %+v, worker reads %+v", iv, wv)
	}
	if p, _ := env(wc, "PATH"); !strings.HasPrefix(p.Value, "/opt/drover-clis/bin:") {
		t.Errorf("worker PATH %q", p.Value)
	}

	// A shared claim: each pod in its own directory.
	m = render(t, "worker: {workDir: {type: persistentVolumeClaim, persistentVolumeClaim: {claimName: drover-work}}}")
	spec = get[*appsv1.Deployment](t, m, "Deployment/"+fullname+"-worker").Spec.Template.Spec
	wc = container(t, spec, "worker")
	vm, v := mountedAt(t, spec, wc, "/var/lib/drover/work")
	if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "drover-work" || vm.SubPathExpr != "$(DROVER_WORKER_ID)" {
		t.Errorf("shared work dir %+v on %+v", vm, v)
	}
}

// TestChartRejects checks values that would fail late, in a pod, fail when
// the chart is rendered, naming the value.
func TestChartRejects(t *testing.T) {
	for values, want := range map[string]string{
		"config: {nats: {url: 'nats://x:4222'}}":                     "config.nats: set by the chart",
		"config: {data_dir: /x}":                                     "config.data_dir: set by the chart",
		"config: {worker: {slots: 4}}":                               "config.worker.slots: set by the chart",
		"worker: {pool: gpu_large}":                                  "worker.pool: must be an id",
		"worker: {slots: 0}":                                         "worker.slots: must be 1..1024",
		"worker: {terminationGracePeriodSeconds: 30}":                "at least the drain timeout (30s) + 15s",
		"worker: {drainTimeoutSeconds: 120}":                         "at least the drain timeout (120s) + 15s",
		"worker: {workDir: {type: hostPath}}":                        "worker.workDir.type",
		"worker: {workDir: {type: persistentVolumeClaim}}":           "claimName: required",
		"worker: {apiKeys: [{name: OPENAI_API_KEY, value: sk-123}]}": "read from a Secret",
		"worker: {pool: gpu}":                                        "serve runtime claude-code, but the worker role may not pull its jobs; list claude-code under pool gpu",
		"config: {runtimes: {aider: {binary: aider}}}":               "serve runtime aider, but the worker role may not pull",
	} {
		err := renderErr(t, values)
		if !strings.Contains(err, want) {
			t.Errorf("%s: error %q, want %q", values, err, want)
		}
		if strings.Contains(err, "sk-123") {
			t.Errorf("the error repeats the secret value: %s", err)
		}
	}
	// A config key the chart leaves to the user, rejected by Drover's loader:
	// the render succeeds and the loader names it.
	m := render(t, "config: {defaults: {pool: 'bad pool'}}")
	cm := get[*corev1.ConfigMap](t, m, "ConfigMap/"+fullname+"-config")
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["controller.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(config.LoadOptions{File: file}); err == nil || !strings.Contains(err.Error(), "defaults.pool") {
		t.Errorf("loader error %v, want defaults.pool", err)
	}
}

// TestChartExistingAuthSecret names the Secret of the NATS passwords: the
// chart creates none and both sides read the named one.
func TestChartExistingAuthSecret(t *testing.T) {
	m := render(t, "global: {drover: {natsAuth: {existingSecret: my-nats-passwords}}}")
	for _, k := range m.keys() {
		if strings.HasPrefix(k, "Secret/") {
			t.Errorf("%s rendered with an existing Secret named", k)
		}
	}
	sts := get[*appsv1.StatefulSet](t, m, "StatefulSet/"+fullname+"-controller")
	dep := get[*appsv1.Deployment](t, m, "Deployment/"+fullname+"-worker")
	ctl, wc := container(t, sts.Spec.Template.Spec, "controller"), container(t, dep.Spec.Template.Spec, "worker")
	checkNATSAuth(t, m, "", ctl, wc)
	if e, _ := env(wc, "DROVER_NATS_PASSWORD"); e.ValueFrom.SecretKeyRef.Name != "my-nats-passwords" {
		t.Errorf("worker password from %+v", e.ValueFrom.SecretKeyRef)
	}

	// Auth off: no users on either side.
	m = render(t, "global: {drover: {natsAuth: {enabled: false}}}")
	if m.nats.Config.Merge.Authorization != nil || len(m.nats.Container.Env) != 0 {
		t.Errorf("auth off, NATS still gets %+v %+v", m.nats.Config.Merge.Authorization, m.nats.Container.Env)
	}
	wc = container(t, get[*appsv1.Deployment](t, m, "Deployment/"+fullname+"-worker").Spec.Template.Spec, "worker")
	if _, ok := env(wc, "DROVER_NATS_PASSWORD"); ok {
		t.Error("auth off, the worker still gets a password")
	}
}

// TestChartControllers runs three controllers, a leader and standbys: a
// StatefulSet of three, each pod with a volume of its own, spread over
// nodes, a PodDisruptionBudget that lets a drain take one at a time, and
// every controller on the NATS chart's server (or the external one), never
// a server of its own: an embedded server per controller would be a log
// per controller.
func TestChartControllers(t *testing.T) {
	for values, url := range map[string]string{
		"controller: {replicas: 3}": "nats://" + natsFullname + ":4222",
		"controller: {replicas: 3}\nnats: {enabled: false}\nexternalNats: {url: 'nats://nats.messaging:4222'}": "nats://nats.messaging:4222",
	} {
		m := render(t, values)
		checkPods(t, m)
		sts := get[*appsv1.StatefulSet](t, m, "StatefulSet/"+fullname+"-controller")
		if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 || len(sts.Spec.VolumeClaimTemplates) != 1 {
			t.Fatalf("%s: replicas %v, volume claim templates %d", values, sts.Spec.Replicas, len(sts.Spec.VolumeClaimTemplates))
		}
		pod := sts.Spec.Template
		aff := pod.Spec.Affinity
		if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Fatalf("%s: affinity %+v", values, aff)
		}
		term := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) || term.TopologyKey != "kubernetes.io/hostname" {
			t.Errorf("%s: anti-affinity %+v does not keep the controllers apart (%v)", values, term, err)
		}
		pdb := get[*policyv1.PodDisruptionBudget](t, m, "PodDisruptionBudget/"+fullname+"-controller")
		pdbSel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !pdbSel.Matches(labels.Set(pod.Labels)) || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("%s: PodDisruptionBudget %+v", values, pdb.Spec)
		}
		cfg := configFile(t, m, pod.Spec, "controller", "controller.yaml")
		// nats.url set: no controller embeds a server.
		if cfg.NATS.URL != url {
			t.Errorf("%s: the controllers connect to %q, want the shared server %s", values, cfg.NATS.URL, url)
		}
		if ctl := container(t, pod.Spec, "controller"); ctl.ReadinessProbe == nil || ctl.ReadinessProbe.HTTPGet == nil || ctl.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: readiness %+v", values, ctl.ReadinessProbe)
		}
	}
	// One controller: no disruption budget (it would block every drain), no
	// anti-affinity of the chart's.
	m := render(t, "")
	if _, ok := m.objs["PodDisruptionBudget/"+fullname+"-controller"]; ok {
		t.Error("a PodDisruptionBudget for one controller")
	}
	if aff := get[*appsv1.StatefulSet](t, m, "StatefulSet/"+fullname+"-controller").Spec.Template.Spec.Affinity; aff != nil {
		t.Errorf("affinity for one controller: %+v", aff)
	}
	// Required spreading, and the user's own affinity over the chart's.
	hard := get[*appsv1.StatefulSet](t, render(t, "controller: {replicas: 2, antiAffinity: hard}"), "StatefulSet/"+fullname+"-controller")
	if a := hard.Spec.Template.Spec.Affinity; a == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("antiAffinity hard: %+v", a)
	}
	own := get[*appsv1.StatefulSet](t, render(t, "controller: {replicas: 2, affinity: {nodeAffinity: {}}}"), "StatefulSet/"+fullname+"-controller")
	if a := own.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity != nil || a.NodeAffinity == nil {
		t.Errorf("the user's affinity: %+v", a)
	}
	for values, want := range map[string]string{
		"controller: {replicas: 0}":                      "controller.replicas: must be 1..5",
		"controller: {replicas: 7}":                      "controller.replicas: must be 1..5",
		"controller: {replicas: 2, antiAffinity: maybe}": "controller.antiAffinity: must be soft, hard or none",
		"config: {nats: {listen: '0.0.0.0:4222'}}":       "config.nats: set by the chart",
	} {
		if err := renderErr(t, values); !strings.Contains(err, want) {
			t.Errorf("%s: error %q, want %q", values, err, want)
		}
	}
}
