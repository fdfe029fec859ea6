package console

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configures a Console.
type Options struct {
	Projection  Projection
	Folds       Folds
	Operator    Operator // nil: no actions, whoever logs in
	Artifacts   Artifacts
	Fleet       Fleet
	DeadLetters DeadLetters
	Auth        Auth
	// Listen is the address the console is served on, to say in its log
	// whether it reaches beyond this machine.
	Listen string
	Log    *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// LiveInterval is the least time between two live updates of one
	// page: the folds in between are sent as one. Defaults to 250ms.
	LiveInterval time.Duration
	// PageSize is the tasks of a flow's table on one page. Defaults to 100.
	PageSize int
}

// Console serves the pages under /ui/. Close ends its live streams.
type Console struct {
	o        Options
	mux      *http.ServeMux
	pages    map[string]*template.Template
	assets   map[string]string // file -> its URL with a content hash
	sessions *sessions
	throttle *throttle
	cache    *snapshots

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex // guards closed against wg.Add racing Close's Wait
	closed bool
	wg     sync.WaitGroup
}

// New builds a console.
func New(o Options) (*Console, error) {
	if o.Projection == nil || o.Folds == nil {
		return nil, errors.New("console: a projection and its fold notices are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.LiveInterval <= 0 {
		o.LiveInterval = 250 * time.Millisecond
	}
	if o.PageSize <= 0 {
		o.PageSize = 100
	}
	if o.Auth.SessionTTL <= 0 {
		o.Auth.SessionTTL = 12 * time.Hour
	}
	c := &Console{o: o, sessions: newSessions(o.Auth.SessionTTL, o.Now), throttle: newThrottle(o.Now),
		cache: newSnapshots(o.Projection)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := c.loadAssets(); err != nil {
		return nil, err
	}
	if err := c.loadTemplates(); err != nil {
		return nil, err
	}
	c.routes()
	switch {
	case !o.Auth.Enabled():
		o.Log.Info("console is read-only: no console.token or console.users is configured", "addr", o.Listen)
	case !isLoopback(o.Listen):
		o.Log.Warn("console logins travel over plain HTTP unless a TLS proxy is in front (console.secure_cookie)", "addr", o.Listen)
	}
	return c, nil
}

// Close ends the live streams and waits for their goroutines; a stream
// asked for afterwards is refused.
func (c *Console) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// enter counts a live stream in, unless the console is closed; leave
// counts it out.
func (c *Console) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

func (c *Console) leave() { c.wg.Done() }

// ServeHTTP serves /ui/ and everything under it.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// No script or style but the console's own files; no framing, no
	// plugins, no base or form target elsewhere: an injected element would
	// have nothing to run even if escaping failed.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() {
	m := http.NewServeMux()
	csrf := http.NewCrossOriginProtection()
	post := func(h http.HandlerFunc) http.Handler { return csrf.Handler(h) }
	m.HandleFunc("GET /ui/{$}", c.flowsPage)
	m.HandleFunc("GET /ui/live", c.flowsLive)
	m.HandleFunc("GET /ui/flows/{flow}", c.flowPage)
	m.HandleFunc("GET /ui/flows/{flow}/graph.json", c.graphJSON)
	m.HandleFunc("GET /ui/flows/{flow}/live", c.flowLive)
	m.HandleFunc("GET /ui/flows/{flow}/tasks/{task}", c.taskPage)
	m.HandleFunc("GET /ui/flows/{flow}/tasks/{task}/live", c.taskLive)
	m.HandleFunc("GET /ui/attempts/{attempt}", c.attemptPage)
	m.HandleFunc("GET /ui/attempts/{attempt}/live", c.attemptLive)
	m.HandleFunc("GET /ui/attempts/{attempt}/log", c.attemptLog)
	m.HandleFunc("GET /ui/workers", c.workersPage)
	m.HandleFunc("GET /ui/workers/live", c.workersLive)
	m.HandleFunc("GET /ui/dead-letters", c.deadLettersPage)
	m.HandleFunc("GET /ui/dead-letters/live", c.deadLettersLive)
	m.HandleFunc("GET /ui/login", c.loginPage)
	m.Handle("POST /ui/login", post(c.login))
	m.Handle("POST /ui/logout", post(c.logout))
	m.Handle("POST /ui/actions/{action}", post(c.act))
	m.HandleFunc("GET /ui/static/{file}", c.static)
	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) { c.notFound(w, r, "no such page") })
	c.mux = m
}

func (c *Console) loadAssets() error {
	c.assets = map[string]string{}
	return fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		name := path.Base(p)
		c.assets[name] = "/ui/static/" + name + "?v=" + hex.EncodeToString(sum[:6])
		return nil
	})
}

func (c *Console) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := staticFS.ReadFile("static/" + name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	}
	// URLs carry the content's hash (asset), so a file can be kept long.
	w.Header().Set("Cache-Control", "public, max-age=86400")
	_, _ = w.Write(b)
}

func (c *Console) loadTemplates() error {
	funcs := template.FuncMap{
		"asset": func(name string) string { return c.assets[name] },
		"dict": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
			return m
		},
		"pct":  func(f float64) string { return fmt.Sprintf("%.3f", f) },
		"join": strings.Join,
	}
	base, err := template.New("base").Funcs(funcs).ParseFS(templateFS, "templates/base.html")
	if err != nil {
		return fmt.Errorf("console: templates: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	c.pages = map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "base" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return fmt.Errorf("console: template %s: %w", name, err)
		}
		c.pages[name] = t
	}
	return nil
}

// page is what every page's template gets.
type page struct {
	Title   string
	Nav     string
	Live    string // the page's live stream
	User    string // logged in as
	CSRF    string
	Flash   string
	Auth    bool   // logins are configured
	CanAct  bool   // the viewer may take actions
	Why     string // why not, for the read-only banner
	Back    string // this page, to come back to after an action or login
	Content any
}

func (c *Console) newPage(r *http.Request, title, nav string) *page {
	p := &page{Title: title, Nav: nav, Auth: c.o.Auth.Enabled(), Back: r.URL.RequestURI()}
	sess := c.sessions.get(r)
	switch {
	case !c.o.Auth.Enabled():
		p.Why = "Read-only: no console.token or console.users is configured (docs/console.md)."
	case c.o.Operator == nil:
		p.Why = "Read-only: this console has no operator API."
	case sess == nil:
		p.Why = "Read-only until you log in."
	default:
		p.User, p.CSRF, p.CanAct = sess.user, sess.csrf, true
		p.Flash = c.sessions.takeFlash(r)
	}
	return p
}

func (c *Console) render(w http.ResponseWriter, status int, name string, p *page) {
	t := c.pages[name]
	cp := *p
	cp.Content, cp.Flash = cleaned(p.Content), cleanTerminal(p.Flash)
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, name, &cp); err != nil {
		c.o.Log.Warn("console: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, b.String())
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request, msg string) {
	p := c.newPage(r, "Not found", "")
	p.Content = msg
	c.render(w, http.StatusNotFound, "error", p)
}

func (c *Console) failed(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p := c.newPage(r, "Error", "")
	p.Content = msg
	c.render(w, status, "error", p)
}

// safeBack is where to return after a POST: a page of the console, never
// another site.
func safeBack(s string) string {
	if !strings.HasPrefix(s, "/ui/") || strings.HasPrefix(s, "//") || strings.ContainsAny(s, "\\\r\n") {
		return "/ui/"
	}
	return s
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.showLogin(w, r, http.StatusOK, "")
}

type loginView struct {
	Token, Users bool
	Error        string
	CSRF         string
}

func (c *Console) showLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p := c.newPage(r, "Log in", "login")
	p.Back = safeBack(r.FormValue("back"))
	v := loginView{Token: c.o.Auth.Token != "", Users: len(c.o.Auth.Users) > 0, Error: msg, CSRF: randomToken()}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: v.CSRF, Path: cookiePath, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.secure(r), MaxAge: 3600})
	p.Content = v
	c.render(w, status, "login", p)
}

func (c *Console) secure(r *http.Request) bool { return r.TLS != nil || c.o.Auth.SecureCookie }

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.o.Auth.Enabled() {
		c.failed(w, r, http.StatusForbidden, "Logins are not configured: set console.token or console.users.")
		return
	}
	if ok, wait := c.throttle.allowed(r); !ok {
		w.Header().Set("Retry-After", fmt.Sprint(int(wait.Seconds())+1))
		c.showLogin(w, r, http.StatusTooManyRequests, "Too many failed logins: try again later.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	ck, err := r.Cookie(loginCookie)
	if err != nil || ck.Value == "" || !equalSecret(ck.Value, r.PostFormValue("csrf")) {
		c.showLogin(w, r, http.StatusForbidden, "The login form expired: try again.")
		return
	}
	name, password := r.PostFormValue("name"), r.PostFormValue("password")
	if name == "" {
		password = r.PostFormValue("token")
	}
	user := c.o.Auth.check(name, password)
	if user == "" {
		c.throttle.failed(r)
		c.o.Log.Warn("console: failed login", "client", clientKey(r), "name", name)
		c.showLogin(w, r, http.StatusUnauthorized, "Wrong name, password or token.")
		return
	}
	id, _ := c.sessions.create(user)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: cookiePath, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.secure(r), MaxAge: int(c.o.Auth.SessionTTL.Seconds())})
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: cookiePath, MaxAge: -1})
	c.o.Log.Info("console: login", "user", user, "client", clientKey(r))
	http.Redirect(w, r, safeBack(r.PostFormValue("back")), http.StatusSeeOther)
}

// session returns the request's session if its CSRF token is the
// session's.
func (c *Console) session(r *http.Request) *session {
	sess := c.sessions.get(r)
	if sess == nil || !equalSecret(sess.csrf, r.PostFormValue("csrf")) {
		return nil
	}
	return sess
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if c.session(r) == nil {
		c.failed(w, r, http.StatusForbidden, "Not logged in, or the form expired.")
		return
	}
	c.sessions.delete(r)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: cookiePath, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.secure(r)})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// act carries out an operator action from a form.
func (c *Console) act(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	a := Action(r.PathValue("action"))
	known := false
	for _, x := range actions {
		known = known || x == a
	}
	switch {
	case !known:
		c.notFound(w, r, "no such action")
		return
	case !c.o.Auth.Enabled() || c.o.Operator == nil:
		c.failed(w, r, http.StatusForbidden, "This console is read-only: actions need console.token or console.users.")
		return
	}
	sess := c.session(r)
	if sess == nil {
		c.failed(w, r, http.StatusForbidden, "Log in to take actions (or the form expired: reload the page).")
		return
	}
	target, reason := r.PostFormValue("target"), r.PostFormValue("reason")
	if reason == "" {
		reason = "from the console by " + sess.user
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	msg, err := c.o.Operator.Act(ctx, a, target, reason)
	if err != nil {
		msg = fmt.Sprintf("%s %s failed: %v", a, target, err)
	}
	c.o.Log.Info("console: action", "user", sess.user, "action", a, "target", target, "err", err)
	c.sessions.setFlash(r, msg)
	http.Redirect(w, r, safeBack(r.PostFormValue("back")), http.StatusSeeOther)
}
