package sandbox

import "path/filepath"

// systemPaths are what every confined process may read and execute: the
// system's programs and libraries, its configuration, /proc and /sys. A
// secret in one of them (the worker's configuration under /etc) is denied
// by sibling expansion like any other. /tmp, /var, /home, /root, /run and
// /srv are not among them: a process gets its own TMPDIR and HOME.
var systemPaths = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc", "/opt", "/nix/store", "/snap",
	"/proc", "/sys",
}

// systemLinks are files under /etc that are commonly symlinks out of the
// system paths (to /run, /var): their targets are readable too, and only
// they, so DNS resolution and TLS verification work.
var systemLinks = []string{
	"/etc/resolv.conf", "/etc/hosts", "/etc/localtime", "/etc/ssl/certs", "/etc/ssl/cert.pem",
	"/etc/pki/tls/certs", "/etc/ca-certificates", "/etc/nsswitch.conf",
}

// devices are the device files a process may read and write (with ioctl:
// isatty on /dev/tty), and /dev/pts for terminals it opens itself.
var devices = []string{
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
	"/dev/tty", "/dev/ptmx", "/dev/pts",
}

func systemGrants() []Grant {
	var out []Grant
	for _, p := range systemPaths {
		out = append(out, Grant{Path: p})
	}
	for _, p := range systemLinks {
		if t, err := filepath.EvalSymlinks(p); err == nil && t != p {
			out = append(out, Grant{Path: t})
		}
	}
	for _, p := range devices {
		out = append(out, Grant{Path: p, Write: true})
	}
	return out
}

// homeSecrets are the credentials commonly kept in a HOME: keys, tokens
// and the configuration of tools that hold them.
var homeSecrets = []string{
	".ssh", ".gnupg", ".git-credentials", ".config/git/credentials", ".netrc", ".npmrc", ".pypirc",
	".docker/config.json", ".kube", ".aws", ".azure", ".config/gcloud", ".config/gh", ".config/hub",
	".cargo/credentials", ".cargo/credentials.toml", ".terraform.d/credentials.tfrc.json",
	".vault-token", ".pgpass", ".my.cnf",
}

// HomeSecrets lists the credential paths under a HOME that a process
// given that HOME to read must not reach: what a worker's HOME holds for
// git, ssh, registries and clouds.
func HomeSecrets(home string) []string {
	out := make([]string, 0, len(homeSecrets))
	for _, p := range homeSecrets {
		out = append(out, filepath.Join(home, p))
	}
	return out
}
