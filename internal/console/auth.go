package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Auth says who may take actions. With neither a token nor users the
// console is read-only.
type Auth struct {
	// Token logs in whoever presents it.
	Token string
	// Users log in with a name and a password checked against its bcrypt
	// hash.
	Users []User
	// SessionTTL is how long a login lasts. Defaults to 12h.
	SessionTTL time.Duration
	// SecureCookie marks the session cookie Secure on plain HTTP too
	// (behind a TLS proxy); it is Secure on TLS anyway. Defaults to false.
	SecureCookie bool
}

// User is one login.
type User struct {
	Name         string
	PasswordHash string
}

// Enabled reports whether anyone can log in.
func (a Auth) Enabled() bool { return a.Token != "" || len(a.Users) > 0 }

// Cookie names. The session cookie is scoped to the console's path.
const (
	sessionCookie = "drover_console"
	loginCookie   = "drover_console_login" // the login form's CSRF token
	cookiePath    = "/ui/"
)

// session is one login.
type session struct {
	user    string
	csrf    string
	expires time.Time
	flash   string // a message for the next page
}

// sessions holds the logins in memory: a restart logs everyone out.
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	ttl  time.Duration
	now  func() time.Time
}

// maxSessions bounds the logins held; the oldest goes first.
const maxSessions = 10000

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{byID: map[string]*session{}, ttl: ttl, now: now}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *sessions) create(user string) (id string, sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.byID) >= maxSessions {
		var oldest string
		for id, x := range s.byID {
			if x.expires.Before(now) {
				delete(s.byID, id)
				continue
			}
			if oldest == "" || x.expires.Before(s.byID[oldest].expires) {
				oldest = id
			}
		}
		if len(s.byID) >= maxSessions {
			delete(s.byID, oldest)
		}
	}
	id = randomToken()
	sess = &session{user: user, csrf: randomToken(), expires: now.Add(s.ttl)}
	s.byID[id] = sess
	return id, sess
}

// get returns the live session of a request, or nil.
func (s *sessions) get(r *http.Request) *session {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.byID[c.Value]
	if sess == nil {
		return nil
	}
	if !s.now().Before(sess.expires) {
		delete(s.byID, c.Value)
		return nil
	}
	cp := *sess
	return &cp
}

func (s *sessions) delete(r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.mu.Lock()
		delete(s.byID, c.Value)
		s.mu.Unlock()
	}
}

// setFlash leaves a message for the session's next page; takeFlash reads
// it once.
func (s *sessions) setFlash(r *http.Request, msg string) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.mu.Lock()
		if sess := s.byID[c.Value]; sess != nil {
			sess.flash = msg
		}
		s.mu.Unlock()
	}
}

func (s *sessions) takeFlash(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.byID[c.Value]
	if sess == nil {
		return ""
	}
	msg := sess.flash
	sess.flash = ""
	return msg
}

// equalSecret compares two secrets in time that depends on neither's
// content nor length.
func equalSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// dummyHash is checked for an unknown user, so that a login takes as long
// whether or not the name exists.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("not a password of anyone's"), bcrypt.DefaultCost)

// check returns who the credentials log in as, or "" if nobody. A token
// is given as the password with an empty name.
func (a Auth) check(name, password string) string {
	if name == "" {
		if a.Token != "" && password != "" && equalSecret(password, a.Token) {
			return "token"
		}
		return ""
	}
	hash := dummyHash
	found := -1
	for i, u := range a.Users {
		if equalSecret(u.Name, name) {
			hash, found = []byte(u.PasswordHash), i
		}
	}
	ok := bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
	if found < 0 || !ok {
		return ""
	}
	return a.Users[found].Name
}

// throttle limits failed logins: per client address, and in all, each a
// token bucket that a failure drains and time refills.
type throttle struct {
	mu     sync.Mutex
	now    func() time.Time
	per    map[string]*bucket
	all    bucket
	burst  float64 // failures a client may make at once
	rate   float64 // failures per second it regains
	burstT float64 // in all
	rateT  float64
}

type bucket struct {
	tokens float64
	at     time.Time
}

// maxThrottled bounds the addresses remembered.
const maxThrottled = 10000

func newThrottle(now func() time.Time) *throttle {
	return &throttle{now: now, per: map[string]*bucket{},
		burst: 5, rate: 1.0 / 12, // 5 at once, then one every 12 s
		burstT: 50, rateT: 1,
	}
}

func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (b *bucket) fill(now time.Time, burst, rate float64) {
	if b.at.IsZero() {
		b.tokens, b.at = burst, now
		return
	}
	b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
}

// allowed reports whether a login may be tried now, and if not, how long
// until it may.
func (t *throttle) allowed(r *http.Request) (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.all.fill(now, t.burstT, t.rateT)
	if t.all.tokens < 1 {
		return false, time.Duration((1 - t.all.tokens) / t.rateT * float64(time.Second))
	}
	b := t.per[clientKey(r)]
	if b == nil {
		return true, 0
	}
	b.fill(now, t.burst, t.rate)
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) / t.rate * float64(time.Second))
	}
	return true, 0
}

// failed records a failed login.
func (t *throttle) failed(r *http.Request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	k := clientKey(r)
	b := t.per[k]
	if b == nil {
		if len(t.per) >= maxThrottled {
			for k, x := range t.per {
				if x.fill(now, t.burst, t.rate); x.tokens >= t.burst {
					delete(t.per, k)
				}
			}
			if len(t.per) >= maxThrottled {
				clear(t.per) // flooded from many addresses: the global bucket still holds
			}
		}
		b = &bucket{}
		t.per[k] = b
	}
	b.fill(now, t.burst, t.rate)
	b.tokens--
	t.all.fill(now, t.burstT, t.rateT)
	t.all.tokens--
}

// isLoopback reports whether a listen address (host:port) reaches only
// this machine.
func isLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
