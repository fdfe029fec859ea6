package natstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// PKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, as PEM files: ca.pem, server-cert.pem, server-key.pem,
// client-cert.pem and client-key.pem.
type PKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// NewPKI writes a fresh PKI into dir, valid for a day.
func NewPKI(t testing.TB, dir string) PKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "drover test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := PKI{CA: filepath.Join(dir, "ca.pem")}
	writePEM(t, p.CA, "CERTIFICATE", caDER)
	issue := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP) (cert, key string) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		cert, key = filepath.Join(dir, name+"-cert.pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, cert, "CERTIFICATE", der)
		writePEM(t, key, "EC PRIVATE KEY", keyDER)
		return cert, key
	}
	p.ServerCert, p.ServerKey = issue("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.ClientCert, p.ClientKey = issue("client", 3, x509.ExtKeyUsageClientAuth, nil)
	return p
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// NKeyUser makes an NKey user: its seed (what the client keeps, in a file
// for nats.nkey_file) and its public key (what the server lists).
func NKeyUser(t testing.TB) (seed, public string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	s, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return string(s), pub
}
