package drover_test

import (
	"bufio"
	"cmp"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	natsconf "github.com/nats-io/nats-server/v2/conf"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// example is one values file the chart must install with.
type example struct {
	name, values string
}

// readmeExamples are the values files of README.md: its yaml blocks and the
// file its install example writes with a heredoc, each named by its section.
func readmeExamples(t *testing.T) []example {
	t.Helper()
	f, err := os.Open("README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out     []example
		section string
		block   *strings.Builder
		end     string
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case block != nil && strings.TrimSpace(line) == end:
			out = append(out, example{fmt.Sprintf("README %d %s", len(out)+1, section), block.String()})
			block = nil
		case block != nil:
			block.WriteString(line + "\n")
		case strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		case strings.TrimSpace(line) == "```yaml":
			block, end = &strings.Builder{}, "```"
		case strings.Contains(line, "<<'EOF'") && strings.Contains(line, ".yaml"):
			block, end = &strings.Builder{}, "EOF"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if block != nil {
		t.Fatalf("README.md: an example in %q does not end", section)
	}
	// The sections README.md has examples in; a block the parser misses fails here.
	if len(out) < 10 {
		t.Fatalf("README.md: %d examples found, want at least 10", len(out))
	}
	return out
}

// natsCases are values that change how Drover's pods reach the NATS subchart,
// each of which must render pods that connect.
var natsCases = []example{
	{"defaults", ""},
	{"cluster", "nats: {config: {cluster: {enabled: true}}}"},
	{"service name", "nats: {service: {name: queue}}"},
	{"service name by $tplYaml", `
nats:
  service:
    name:
      $tplYaml: >-
        {{ include "nats.fullname" . }}-svc
`},
	{"service name by $tplYamlSpread", `
nats:
  service:
    named:
      $tplYamlSpread: |
        name: {{ .Release.Name }}-spread
`},
	{"full name", "nats: {fullnameOverride: queue}"},
	{"name", "nats: {nameOverride: mq}"},
	{"client port", "nats: {config: {nats: {port: 4333}}}"},
	{"namespace", "nats: {namespaceOverride: messaging}"},
	{"namespace by $tplYaml", "nats: {namespaceOverride: {$tplYaml: '{{ .Release.Namespace }}-nats'}}"},
	{"namespace, existing Secret", "nats: {namespaceOverride: messaging}\nglobal: {drover: {natsAuth: {existingSecret: nats-passwords}}}"},
	{"namespace, auth off", "nats: {namespaceOverride: messaging}\nglobal: {drover: {natsAuth: {enabled: false}}}"},
	{"TLS, CA in the certificate's Secret", `
nats:
  config: {nats: {tls: {enabled: true, secretName: nats-server-tls}}}
  tlsCA: {enabled: true, secretName: nats-server-tls}
`},
	{"TLS, CA in a ConfigMap", `
nats:
  config: {nats: {tls: {enabled: true, secretName: nats-server-tls}}}
  tlsCA: {enabled: true, configMapName: company-ca, key: bundle.pem}
`},
	{"TLS by $tplYaml, other namespace", `
nats:
  namespaceOverride: messaging
  config: {nats: {tls: {enabled: {$tplYaml: "true"}, secretName: nats-server-tls, merge: {verify: false}}}}
  tlsCA: {enabled: true, secretName: nats-ca}
`},
	{"KEDA on a cluster", `
nats: {config: {cluster: {enabled: true}}}
keda: {enabled: true}
worker: {runtimes: [claude-code]}
`},
	{"KEDA, monitoring over TLS", `
nats:
  config:
    nats: {tls: {enabled: true, secretName: nats-server-tls}}
    monitor: {tls: {enabled: true}}
  tlsCA: {enabled: true, secretName: nats-server-tls}
keda: {enabled: true}
worker: {runtimes: [claude-code]}
`},
	{"KEDA, one server with a server name prefix", `
nats: {config: {serverNamePrefix: east-}}
keda: {enabled: true}
worker: {runtimes: [claude-code]}
`},
	{"cluster with a server name prefix, no KEDA", "nats: {config: {cluster: {enabled: true}, serverNamePrefix: east-}}"},
	{"KEDA, headless Service named", `
nats: {headlessService: {name: {$tplYaml: '{{ include "nats.fullname" . }}-pods'}}, config: {cluster: {enabled: true}}}
keda: {enabled: true}
worker: {runtimes: [claude-code]}
`},
}

// TestChartNATSWiring renders every README example and every case of
// natsCases against the NATS chart (the stand-in, and the real one when
// DROVER_NATS_CHART names it) and follows each of Drover's connections to
// what that chart creates: the Service and port of the URL, TLS and the CA,
// the users and their Secret, KEDA's monitoring endpoint.
func TestChartNATSWiring(t *testing.T) {
	cases := append(readmeExamples(t), natsCases...)
	for name, nc := range natsCharts(t) {
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				m, err := tryRender(t, c.values, renderOpts{natsChart: nc})
				if err != nil {
					t.Fatalf("render: %v\nvalues:\n%s", err, c.values)
				}
				checkPods(t, m)
				checkNATSWiring(t, m)
			})
		}
	}
}

// TestChartNATSWiringResults pins what the wiring test cannot see from the
// objects alone: the URL each case gives, and the namespaces Drover's Secret
// is written in.
func TestChartNATSWiringResults(t *testing.T) {
	for _, c := range []struct {
		values, url string
		secrets     []string
	}{
		{"", "nats://prod-nats:4222", []string{"Secret/prod-drover-nats-auth"}},
		{natsCase(t, "service name by $tplYaml"), "nats://prod-nats-svc:4222", nil},
		{natsCase(t, "service name by $tplYamlSpread"), "nats://prod-spread:4222", nil},
		{"nats: {fullnameOverride: queue, config: {nats: {port: 4333}}}", "nats://queue:4333", nil},
		{"nats: {namespaceOverride: messaging}", "nats://prod-nats.messaging.svc:4222",
			[]string{"Secret/messaging/prod-drover-nats-auth", "Secret/prod-drover-nats-auth"}},
		{natsCase(t, "namespace by $tplYaml"), "nats://prod-nats.agents-nats.svc:4222", nil},
		{natsCase(t, "TLS, CA in the certificate's Secret"), "tls://prod-nats:4222", nil},
		{natsCase(t, "TLS by $tplYaml, other namespace"), "tls://prod-nats.messaging.svc:4222", nil},
	} {
		m := render(t, c.values)
		cm := get[*corev1.ConfigMap](t, m, "ConfigMap/"+fullname+"-config")
		if got := droverNATSURL(t, cm, "worker.yaml"); got != c.url {
			t.Errorf("%s: url %s, want %s", c.values, got, c.url)
		}
		if c.secrets == nil {
			continue
		}
		var secrets []string
		for _, k := range m.keys() {
			if strings.HasPrefix(k, "Secret/") {
				secrets = append(secrets, k)
			}
		}
		if fmt.Sprint(secrets) != fmt.Sprint(c.secrets) {
			t.Errorf("%s: Secrets %v, want %v", c.values, secrets, c.secrets)
		}
		// One password each, the same in every namespace.
		var first *corev1.Secret
		for _, k := range secrets {
			s := get[*corev1.Secret](t, m, k)
			if first != nil && (string(s.Data["worker-password"]) != string(first.Data["worker-password"]) ||
				string(s.Data["controller-password"]) != string(first.Data["controller-password"])) {
				t.Errorf("%s and %s hold different passwords", first.Name, k)
			}
			first = s
		}
	}
	// KEDA queries the monitoring port over HTTPS when it serves HTTPS.
	so := get[*scaledObject](t, render(t, natsCase(t, "KEDA, monitoring over TLS")), "ScaledObject/"+fullname+"-worker")
	if u := so.Spec.Triggers[0].Metadata["useHttps"]; u != "true" {
		t.Errorf("useHttps %q with the monitoring port on TLS", u)
	}
}

// TestChartNATSRefuses checks values with which Drover's pods (or KEDA) could
// not connect to the NATS subchart fail at render, naming the value.
func TestChartNATSRefuses(t *testing.T) {
	tls := "config: {nats: {tls: {enabled: true, secretName: s}}}, tlsCA: {enabled: true, secretName: s}"
	for values, want := range map[string]string{
		"nats: {config: {nats: {tls: {enabled: true, secretName: s}}}}":                                                                         "nats.config.nats.tls.enabled: Drover's pods must verify the NATS server's certificate: set nats.tlsCA",
		"nats: {config: {nats: {tls: {enabled: true}}}, tlsCA: {enabled: true}}":                                                                "set nats.tlsCA (enabled: true, secretName or configMapName, key)",
		"nats: {config: {nats: {tls: {enabled: true}}}, tlsCA: {secretName: ca}}":                                                               "set nats.tlsCA",
		"nats: {" + tls + "}\nnats: {config: {nats: {tls: {merge: {verify: true}}}}}":                                                           "nats.config.nats.tls.merge.verify: the NATS server would ask for client certificates",
		"nats: {config: {nats: {tls: {enabled: true, merge: {verify_and_map: true}}}}, tlsCA: {enabled: true, secretName: s}}":                  "nats.config.nats.tls.merge.verify_and_map: the NATS server would ask for client certificates",
		"nats: {config: {nats: {tls: {enabled: true, patch: [{op: add, path: /verify, value: true}]}}}, tlsCA: {enabled: true, secretName: s}}": "nats.config.nats.tls.patch verify",
		"nats: {config: {nats: {tls: {enabled: true, merge: {handshake_first: true}}}}, tlsCA: {enabled: true, secretName: s}}":                 "handshake_first: the NATS server would expect TLS before it sends its INFO",
		"nats: {config: {merge: {tls: {cert_file: /c}}}}":                                                                                       "nats.config.merge.tls: set the client port's TLS with nats.config.nats.tls",
		"nats: {service: {enabled: false}}":                                                                                                     "nats.service.enabled: Drover's pods connect to NATS through the NATS chart's Service",
		"nats: {service: {ports: {nats: {enabled: false}}}}":                                                                                    "nats.service.ports.nats.enabled",
		"nats: {service: {name: {$tplYaml: '{{ .Release.Name }}_NATS'}}}":                                                                       `nats.service.name: "prod_NATS" is not a Service name`,
		"nats: {headlessService: {name: Pods}}":                                                                                                 `nats.headlessService.name: "Pods" is not a Service name`,
		"nats: {namespaceOverride: 'Messaging'}":                                                                                                `nats.namespaceOverride: "Messaging" is not a namespace name`,
		"nats: {config: {cluster: {enabled: true}, serverNamePrefix: east-}}\nkeda: {enabled: true}\nworker: {runtimes: [demo]}":                `nats.config.serverNamePrefix: KEDA's nats-jetstream scaler reaches a cluster's consumer leader at SERVER_NAME.prod-nats-headless`,
		"nats: {config: {monitor: {enabled: false}}}\nkeda: {enabled: true}\nworker: {runtimes: [demo]}":                                        "nats.config.monitor.enabled: KEDA reads the attempt consumers' lag",
	} {
		if err := renderErr(t, values); !strings.Contains(err, want) {
			t.Errorf("%s:\nerror %q\nwant  %q", values, err, want)
		}
	}
}

// natsCase is the values of the case of natsCases called name.
func natsCase(t *testing.T, name string) string {
	t.Helper()
	for _, c := range natsCases {
		if c.name == name {
			return c.values
		}
	}
	t.Fatalf("no case %q", name)
	return ""
}

// TestChartNATSProgramNotYAML checks a $tplYaml program whose output is not
// YAML is refused by Drover's chart too (the NATS chart, rendered first, refuses
// it as well).
func TestChartNATSProgramNotYAML(t *testing.T) {
	_, err := tryRender(t, "nats: {service: {name: {$tplYaml: 'a: [b'}}}", renderOpts{noSubchart: true})
	if err == nil || !strings.Contains(err.Error(), "nats: a $tplYaml program gives no YAML") {
		t.Errorf("error %v", err)
	}
}

// droverNATSURL is nats.url of one of Drover's config files.
func droverNATSURL(t *testing.T, cm *corev1.ConfigMap, key string) string {
	t.Helper()
	var c struct {
		NATS struct {
			URL string `json:"url"`
		} `json:"nats"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data[key]), &c); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return c.NATS.URL
}

func natsObj[T any](t *testing.T, m *manifest, key string) T {
	t.Helper()
	o, ok := m.natsObjs[key]
	if !ok {
		keys := make([]string, 0, len(m.natsObjs))
		for k := range m.natsObjs {
			keys = append(keys, k)
		}
		t.Fatalf("the NATS chart renders no %s; it has %v", key, keys)
	}
	v, ok := o.(T)
	if !ok {
		t.Fatalf("%s is a %T", key, o)
	}
	return v
}

// natsServer is the NATS chart's StatefulSet, its namespace and its parsed
// nats.conf, with each variable $NAME in it read as the string "var:NAME"
// (nats-server reads them from its environment).
type natsServer struct {
	sts       *appsv1.StatefulSet
	namespace string
	container corev1.Container
	conf      map[string]any
}

// confVariable is a variable as the value of a key: `key: $NAME`.
var confVariable = regexp.MustCompile(`([:=]\s*)\$([A-Za-z_][A-Za-z0-9_]*)`)

func natsServerOf(t *testing.T, m *manifest) natsServer {
	t.Helper()
	var s natsServer
	for key, o := range m.natsObjs {
		if sts, ok := o.(*appsv1.StatefulSet); ok {
			if s.sts != nil {
				t.Fatalf("the NATS chart renders two StatefulSets")
			}
			s.sts, s.namespace = sts, namespace
			if parts := strings.Split(key, "/"); len(parts) == 3 {
				s.namespace = parts[1]
			}
		}
	}
	if s.sts == nil {
		t.Fatal("the NATS chart renders no StatefulSet")
	}
	spec := s.sts.Spec.Template.Spec
	s.container = container(t, spec, "nats")
	var confMap string
	for _, v := range spec.Volumes {
		if v.Name == "config" && v.ConfigMap != nil {
			confMap = v.ConfigMap.Name
		}
	}
	cm := natsObj[*corev1.ConfigMap](t, m, objKey("ConfigMap", s.namespace, confMap))
	raw := cm.Data["nats.conf"]
	conf, err := natsconf.Parse(confVariable.ReplaceAllString(raw, `${1}"var:${2}"`))
	if err != nil {
		t.Fatalf("nats.conf: %v\n%s", err, raw)
	}
	s.conf = conf
	return s
}

// portOf is the container port a Service port reaches.
func portOf(t *testing.T, c corev1.Container, sp corev1.ServicePort) int32 {
	t.Helper()
	if sp.TargetPort.StrVal == "" && sp.TargetPort.IntVal == 0 {
		return sp.Port
	}
	for _, cp := range c.Ports {
		if cp.Name == sp.TargetPort.StrVal || cp.ContainerPort == sp.TargetPort.IntVal && sp.TargetPort.StrVal == "" {
			return cp.ContainerPort
		}
	}
	t.Fatalf("Service port %s (target %s) reaches no port of container %s", sp.Name, sp.TargetPort.String(), c.Name)
	return 0
}

func confInt(t *testing.T, conf map[string]any, key string) int {
	t.Helper()
	switch v := conf[key].(type) {
	case int64:
		return int(v)
	case float64:
		return int(v)
	}
	t.Fatalf("nats.conf %s is %v (%T)", key, conf[key], conf[key])
	return 0
}

// fileSource names where a file mounted in a pod comes from: "Secret NAME KEY"
// or "ConfigMap NAME KEY".
func fileSource(t *testing.T, spec corev1.PodSpec, c corev1.Container, file string) string {
	t.Helper()
	vm, v := mountedAt(t, spec, c, file)
	rel := strings.TrimPrefix(file, strings.TrimSuffix(vm.MountPath, "/")+"/")
	kind, name, items := "", "", []corev1.KeyToPath(nil)
	switch {
	case v.Secret != nil:
		kind, name, items = "Secret", v.Secret.SecretName, v.Secret.Items
	case v.ConfigMap != nil:
		kind, name, items = "ConfigMap", v.ConfigMap.Name, v.ConfigMap.Items
	default:
		t.Fatalf("%s: %s is on %+v, not a Secret or ConfigMap", c.Name, file, v)
	}
	key := rel
	if len(items) > 0 {
		key = ""
		for _, it := range items {
			if it.Path == rel {
				key = it.Key
			}
		}
		if key == "" {
			t.Fatalf("%s: %s is no item of %s %s: %+v", c.Name, file, kind, name, items)
		}
	}
	return kind + " " + name + " " + key
}

// checkNATSWiring follows Drover's connections to the NATS subchart's objects.
func checkNATSWiring(t *testing.T, m *manifest) {
	t.Helper()
	if len(m.natsObjs) == 0 {
		return // external NATS
	}
	srv := natsServerOf(t, m)
	natsSpec := srv.sts.Spec.Template.Spec
	sts := get[*appsv1.StatefulSet](t, m, "StatefulSet/"+fullname+"-controller")
	dep := get[*appsv1.Deployment](t, m, "Deployment/"+fullname+"-worker")
	cm := get[*corev1.ConfigMap](t, m, "ConfigMap/"+fullname+"-config")
	pods := []struct {
		role string
		spec corev1.PodSpec
		c    corev1.Container
		url  string
	}{
		{"controller", sts.Spec.Template.Spec, container(t, sts.Spec.Template.Spec, "controller"), droverNATSURL(t, cm, "controller.yaml")},
		{"worker", dep.Spec.Template.Spec, container(t, dep.Spec.Template.Spec, "worker"), droverNATSURL(t, cm, "worker.yaml")},
	}
	_, tlsOn := srv.conf["tls"].(map[string]any)
	for _, p := range pods {
		u, err := url.Parse(p.url)
		if err != nil {
			t.Fatalf("%s: nats.url %q: %v", p.role, p.url, err)
		}
		// The Service the URL names, in its namespace (a bare name resolves in
		// the pod's own).
		svcName, svcNS := u.Hostname(), namespace
		if parts := strings.Split(u.Hostname(), "."); len(parts) == 3 && parts[2] == "svc" {
			svcName, svcNS = parts[0], parts[1]
		} else if len(parts) != 1 {
			t.Errorf("%s: nats.url host %q is neither SERVICE nor SERVICE.NAMESPACE.svc", p.role, u.Hostname())
		}
		if svcNS != srv.namespace {
			t.Errorf("%s: nats.url %s is in namespace %s, the NATS servers in %s", p.role, p.url, svcNS, srv.namespace)
		}
		svc := natsObj[*corev1.Service](t, m, objKey("Service", svcNS, svcName))
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(srv.sts.Spec.Template.Labels)) {
			t.Errorf("Service %s does not select the NATS pods", svcName)
		}
		port, _ := strconv.Atoi(u.Port())
		reached := false
		for _, sp := range svc.Spec.Ports {
			if int(sp.Port) == port {
				reached = int(portOf(t, srv.container, sp)) == confInt(t, srv.conf, "port")
			}
		}
		if !reached {
			t.Errorf("%s: nats.url %s: Service %s port %d does not reach the NATS client port %d", p.role, p.url, svcName, port, confInt(t, srv.conf, "port"))
		}
		// TLS: the scheme says it, and the CA the pod trusts is the one the
		// server's configuration names.
		caFile, hasCA := env(p.c, "DROVER_NATS_TLS_CA_FILE")
		switch {
		case tlsOn && u.Scheme != "tls":
			t.Errorf("%s: nats.url %s to a server that requires TLS", p.role, p.url)
		case !tlsOn && u.Scheme != "nats":
			t.Errorf("%s: nats.url %s to a server without TLS", p.role, p.url)
		case tlsOn && !hasCA:
			t.Errorf("%s: TLS without a CA file", p.role)
		case !tlsOn && hasCA:
			t.Errorf("%s: a CA file without TLS", p.role)
		case tlsOn:
			serverCA, _ := srv.conf["tls"].(map[string]any)["ca_file"].(string)
			if serverCA == "" {
				t.Fatalf("nats.conf tls has no ca_file: %v", srv.conf["tls"])
			}
			if got, want := fileSource(t, p.spec, p.c, caFile.Value), fileSource(t, natsSpec, srv.container, serverCA); got != want {
				t.Errorf("%s: CA from %s, the NATS server's from %s", p.role, got, want)
			}
		}
		// The user: its password in the server's configuration is a variable of
		// the NATS container, read from the Secret key the pod's password is.
		user, hasUser := env(p.c, "DROVER_NATS_USER")
		auth, hasAuth := srv.conf["authorization"].(map[string]any)
		if hasUser != hasAuth {
			t.Errorf("%s: DROVER_NATS_USER %v, NATS authorization %v", p.role, hasUser, hasAuth)
		}
		if !hasUser {
			continue
		}
		var password string
		users, _ := auth["users"].([]any)
		for _, u := range users {
			if u, _ := u.(map[string]any); u["user"] == user.Value {
				password, _ = u["password"].(string)
			}
		}
		variable, ok := strings.CutPrefix(password, "var:")
		if !ok {
			t.Errorf("NATS user %s: password %q, want a variable", user.Value, password)
			continue
		}
		serverPW, _ := env(srv.container, variable)
		podPW, _ := env(p.c, "DROVER_NATS_PASSWORD")
		if serverPW.ValueFrom == nil || serverPW.ValueFrom.SecretKeyRef == nil || podPW.ValueFrom == nil || podPW.ValueFrom.SecretKeyRef == nil ||
			*serverPW.ValueFrom.SecretKeyRef != *podPW.ValueFrom.SecretKeyRef {
			t.Errorf("%s: NATS reads %s from %+v, the pod its password from %+v", p.role, variable, serverPW.ValueFrom, podPW.ValueFrom)
			continue
		}
		// Each side reads the Secret in its own namespace: the chart writes it
		// in both, unless it is the user's own.
		ref := podPW.ValueFrom.SecretKeyRef
		written := false
		for _, k := range m.keys() {
			written = written || strings.HasPrefix(k, "Secret/")
		}
		if !written {
			continue // the user's own (existingSecret)
		}
		for _, ns := range []string{namespace, srv.namespace} {
			s := get[*corev1.Secret](t, m, objKey("Secret", ns, ref.Name))
			if len(s.Data[ref.Key]) == 0 {
				t.Errorf("Secret %s/%s has no %s", ns, ref.Name, ref.Key)
			}
		}
	}
	checkKEDAWiring(t, m, srv)
}

// checkKEDAWiring checks KEDA's monitoring endpoint is the NATS chart's
// headless Service and monitoring port, and that SERVER.ENDPOINT, where the
// nats-jetstream scaler finds a cluster's consumer leader, is a pod's name.
func checkKEDAWiring(t *testing.T, m *manifest, srv natsServer) {
	t.Helper()
	o, ok := m.objs["ScaledObject/"+fullname+"-worker"]
	if !ok {
		return
	}
	for _, tr := range o.(*scaledObject).Spec.Triggers {
		endpoint := tr.Metadata["natsServerMonitoringEndpoint"]
		host, portStr, _ := strings.Cut(endpoint, ":")
		parts := strings.SplitN(host, ".", 4)
		if len(parts) != 4 || parts[2] != "svc" {
			t.Fatalf("KEDA endpoint %q is not SERVICE.NAMESPACE.svc.DOMAIN:PORT", endpoint)
		}
		if parts[1] != srv.namespace || parts[0] != srv.sts.Spec.ServiceName {
			t.Errorf("KEDA endpoint %s: the NATS pods are named under Service %s in %s", endpoint, srv.sts.Spec.ServiceName, srv.namespace)
		}
		svc := natsObj[*corev1.Service](t, m, objKey("Service", parts[1], parts[0]))
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("KEDA endpoint %s is not a headless Service", endpoint)
		}
		monitorKey := "http_port"
		if tr.Metadata["useHttps"] == "true" {
			monitorKey = "https_port"
		}
		port, _ := strconv.Atoi(portStr)
		reached := false
		for _, sp := range svc.Spec.Ports {
			reached = reached || int(sp.Port) == port && int(portOf(t, srv.container, sp)) == confInt(t, srv.conf, monitorKey)
		}
		if !reached {
			t.Errorf("KEDA endpoint %s does not reach the NATS %s %v", endpoint, monitorKey, srv.conf[monitorKey])
		}
		if _, clustered := srv.conf["cluster"]; clustered {
			if e, _ := env(srv.container, "SERVER_NAME"); e.Value != "$(POD_NAME)" {
				t.Errorf("KEDA on a cluster whose server names are %q, not the pod names", e.Value)
			}
		}
	}
}

// TestChartLintWithSubcharts runs what `helm lint --with-subcharts -f FILE`
// runs, for every README example and natsCases: Helm's linter on the chart
// and then on the NATS chart alone, with the same values (which the first
// run leaves changed, as helm's does).
func TestChartLintWithSubcharts(t *testing.T) {
	cases := append(readmeExamples(t), natsCases...)
	for name, src := range natsCharts(t) {
		src = cmp.Or(src, standInDir)
		dir := lintTree(t, src, nil)
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				if msgs := lintWithSubcharts(t, dir, c.values); len(msgs) > 0 {
					t.Errorf("helm lint --with-subcharts:\n%s\nvalues:\n%s", strings.Join(msgs, "\n"), c.values)
				}
			})
		}
	}
}

// TestChartLintCatchesUnguardedGlobals checks the lint test fails where
// `helm lint --with-subcharts` failed: $tplYaml programs that read
// .Values.global.drover unguarded break the NATS chart linted alone with any
// values file that sets nats.
func TestChartLintCatchesUnguardedGlobals(t *testing.T) {
	guarded := `dig "drover" "natsAuth" dict (get .Values "global" | default dict)`
	dir := lintTree(t, standInDir, func(values string) string {
		if strings.Count(values, guarded) != 2 {
			t.Fatalf("values.yaml: want the guard in both programs")
		}
		return strings.ReplaceAll(values, guarded, ".Values.global.drover.natsAuth")
	})
	msgs := lintWithSubcharts(t, dir, "nats: {config: {cluster: {enabled: true}}}")
	if !strings.Contains(strings.Join(msgs, "\n"), "natsAuth") {
		t.Errorf("lint passed with unguarded programs: %v", msgs)
	}
	if msgs := lintWithSubcharts(t, dir, ""); len(msgs) > 0 {
		t.Errorf("without nats values lint fails: %v", msgs)
	}
}

// lintTree writes the chart, with the NATS chart at src in its charts/
// directory, to a temporary directory as `helm dependency build` would leave
// it, and returns the chart's path there. editValues, if set, changes its
// values.yaml.
func lintTree(t *testing.T, src string, editValues func(string) string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "drover")
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (p == "testdata" || p == "charts") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, p), 0o755)
		}
		if strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if p == "values.yaml" && editValues != nil {
			b = []byte(editValues(string(b)))
		}
		return os.WriteFile(filepath.Join(dst, p), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	charts := filepath.Join(dst, "charts")
	if strings.HasSuffix(src, ".tgz") {
		b, err := os.ReadFile(src)
		if err == nil {
			err = os.MkdirAll(charts, 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(charts, filepath.Base(src)), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		return dst
	}
	if err := os.CopyFS(filepath.Join(charts, "nats"), os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// lintWithSubcharts lints the chart at dir and each chart in its charts/
// directory, as `helm lint --with-subcharts` does, and returns the errors.
func lintWithSubcharts(t *testing.T, dir, values string) []string {
	t.Helper()
	vals, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	paths := []string{dir}
	entries, err := os.ReadDir(filepath.Join(dir, "charts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, "charts", e.Name())
		if strings.HasSuffix(p, ".tgz") {
			// helm lint unpacks an archive first.
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			err = chartutil.Expand(out, f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			p = filepath.Join(out, strings.SplitN(e.Name(), "-", 2)[0])
		}
		paths = append(paths, p)
	}
	var msgs []string
	for _, p := range paths {
		l := lint.AllWithKubeVersionAndSchemaValidation(p, vals, namespace, nil, false)
		for _, msg := range l.Messages {
			if msg.Severity >= support.ErrorSev {
				msgs = append(msgs, path.Base(p)+": "+msg.Error())
			}
		}
	}
	return msgs
}
