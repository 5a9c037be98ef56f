package appsource

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

var (
	// scp-like ssh address (user@host:path), as git and kustomize read it.
	scpURL = regexp.MustCompile(`^[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:[^\s]+$`)
	// defaultPorts are dropped, so https://host:443/x and https://host/x are one repository.
	defaultPorts = map[string]string{"http": "80", "https": "443", "ssh": "22", "git": "9418"}
)

type scheme int

const (
	schemeHTTP scheme = iota
	schemeSSH
	schemeGit
)

// NormalizeRepoURL returns the one spelling of a repository URL that is both matched against
// a Team's spec.repositories and fetched, so what is allowed is what is read. It refuses,
// with a permanent *Error naming spec.source.git.repoURL, any spelling a server could resolve
// to another repository than the one a glob matched:
//
//   - percent-escapes anywhere (%2f, %2e, %5c, and any other: a repository path needs none,
//     and a server that decodes them could read ..%2f as a parent directory);
//   - backslashes, and "." , ".." or empty path segments;
//   - a query or a fragment;
//   - userinfo: a password never (credentials come from spec.source.git.secretRef), a user
//     name only for ssh (ssh://git@host/x, git@host:x);
//   - anything but printable ASCII (international host names are written in punycode);
//   - transports other than https, http, ssh, git and scp-like user@host:path (go-git would
//     read file:// and local paths, the controller's own disk).
//
// The scheme and host are lower-cased, a default port and one trailing slash dropped. An
// scp-like address stays scp-like, with its host lower-cased and its path checked the same way.
func NormalizeRepoURL(raw string) (string, error) {
	n, _, err := normalizeRepoURL(raw)
	return n, err
}

func normalizeRepoURL(raw string) (string, scheme, error) {
	if raw == "" {
		return "", 0, permanent(FieldRepoURL, "repoURL is required")
	}
	refuse := func(why string) (string, scheme, error) {
		return "", 0, permanent(FieldRepoURL, "repoURL %s %s", quoteURL(raw), why)
	}
	const transports = "use https://, http://, ssh://, git:// or scp-like git@host:path"
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f {
			return refuse("is not a URL (only printable ASCII, no spaces: write an international host name in punycode): " + transports)
		}
	}
	if strings.HasPrefix(raw, "-") {
		return refuse("is not a URL: " + transports)
	}
	// A password is refused before anything else, whatever else is wrong, so that the fix
	// the message names is the one that keeps the secret out of the Application.
	if hasPassword(raw) {
		return refuse("carries a password: credentials never come from the URL; remove it and put them in a Secret named by spec.source.git.secretRef (username and password, or token)")
	}
	switch {
	case strings.Contains(raw, "%"):
		return refuse("contains a percent-escape (such as %2f or %2e): a server may decode it into another repository's path; write the path plainly")
	case strings.Contains(raw, `\`):
		return refuse(`contains a backslash: write the path with / only`)
	case strings.Contains(raw, "#"):
		return refuse("has a fragment (#...): remove it")
	case strings.Contains(raw, "?"):
		return refuse("has a query (?...): remove it")
	}
	if scpURL.MatchString(raw) && !strings.Contains(raw, "://") {
		user, rest, _ := strings.Cut(raw, "@")
		host, p, _ := strings.Cut(rest, ":")
		p, why := cleanRepoPath(p, true)
		if why != "" {
			return refuse(why)
		}
		return user + "@" + strings.ToLower(host) + ":" + p, schemeSSH, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return refuse("is not a URL: " + transports)
	}
	var s scheme
	sch := strings.ToLower(u.Scheme)
	switch sch {
	case "https", "http":
		s = schemeHTTP
	case "ssh":
		s = schemeSSH
	case "git":
		s = schemeGit
	default:
		return refuse("has an unsupported scheme: " + transports)
	}
	if u.Hostname() == "" {
		return refuse("has no host: " + transports)
	}
	user := ""
	if u.User != nil {
		if s != schemeSSH {
			return refuse("carries a user name: credentials never come from the URL; remove it and put them in a Secret named by spec.source.git.secretRef")
		}
		user = u.User.Username() + "@"
	}
	host := strings.ToLower(u.Host)
	if port := u.Port(); port != "" && port == defaultPorts[sch] {
		host = strings.TrimSuffix(host, ":"+port)
	}
	p, why := cleanRepoPath(u.Path, false)
	if why != "" {
		return refuse(why)
	}
	return sch + "://" + user + host + p, s, nil
}

func strconvQuote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}

// cleanRepoPath checks a repository path segment by segment and drops one trailing slash; it
// returns why the path is refused, or "". An scp-like path may be relative (git@host:org/x).
func cleanRepoPath(p string, relative bool) (string, string) {
	if p == "" || p == "/" {
		return "", ""
	}
	p = strings.TrimSuffix(p, "/")
	rest := p
	if strings.HasPrefix(p, "/") {
		rest = p[1:]
	} else if !relative {
		return "", "has a path that does not start with /"
	}
	for _, seg := range strings.Split(rest, "/") {
		switch seg {
		case "":
			return "", "has an empty path segment (//): write each directory once"
		case ".", "..":
			return "", "has a " + seg + " path segment: name the repository by its own path"
		}
		// Servlet containers (Tomcat, Jetty: Bitbucket Server, Gerrit, Gitblit) read "..;x" as
		// ".." and drop ";params": a segment could climb out of the glob's directory there.
		if strings.HasPrefix(seg, "..") || strings.Contains(seg, ";") {
			return "", "has a path segment " + strconvQuote(seg) + " that a server may read as a step up (.., ;): name the repository by its own path"
		}
	}
	return p, ""
}

// NormalizeRepoGlob spells a Team's repository glob the way NormalizeRepoURL spells a URL
// (scheme and host lower-cased, a default port and one trailing slash dropped), so a glob
// matches a URL whatever case its host was written in. The path is left alone: a glob that
// names ".." or a percent-escape matches nothing, since no normalised URL holds one.
func NormalizeRepoGlob(glob string) string {
	glob = strings.TrimSuffix(strings.TrimSpace(glob), "/")
	if sch, rest, ok := strings.Cut(glob, "://"); ok {
		sch = strings.ToLower(sch)
		auth, p, hasPath := strings.Cut(rest, "/")
		user := ""
		if i := strings.LastIndex(auth, "@"); i >= 0 {
			user, auth = auth[:i+1], auth[i+1:]
		}
		auth = strings.ToLower(auth)
		if port := defaultPorts[sch]; port != "" {
			auth = strings.TrimSuffix(auth, ":"+port)
		}
		out := sch + "://" + user + auth
		if hasPath {
			out += "/" + p
		}
		return out
	}
	if user, rest, ok := strings.Cut(glob, "@"); ok {
		if host, p, ok := strings.Cut(rest, ":"); ok {
			return user + "@" + strings.ToLower(host) + ":" + p
		}
	}
	return glob
}

// hasPassword reports whether a URL's userinfo holds a password (user:pass@), parsed or not;
// an scp-like address has no password syntax, so user:pass@host:path is one too.
func hasPassword(raw string) bool {
	i := strings.Index(raw, "://")
	if i < 0 {
		user, _, ok := strings.Cut(raw, "@")
		return ok && strings.Contains(user, ":")
	}
	authority := raw[i+3:]
	if end := strings.IndexAny(authority, "/?#"); end >= 0 {
		authority = authority[:end]
	}
	at := strings.LastIndex(authority, "@")
	return at >= 0 && strings.Contains(authority[:at], ":")
}

// RedactURL drops the userinfo of a URL (user name too, but for ssh) so credentials written
// into a repoURL never reach a status message, a log or an event.
func RedactURL(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		if at := strings.LastIndex(raw, "@"); at >= 0 && !scpURL.MatchString(raw) {
			return raw[at+1:]
		}
		return raw
	}
	authority := raw[i+3:]
	end := strings.IndexAny(authority, "/?#")
	if end < 0 {
		end = len(authority)
	}
	at := strings.LastIndex(authority[:end], "@")
	if at < 0 {
		return raw
	}
	user := authority[:at]
	if strings.EqualFold(raw[:i], "ssh") && !strings.Contains(user, ":") {
		return raw // an ssh user name is no secret
	}
	return raw[:i+3] + authority[at+1:]
}

// quoteURL shows a URL a user wrote in a refusal: redacted, bounded, control characters
// escaped. A URL that could not be read may hide a password from RedactURL (user:pa/ss@host),
// so here everything before the last @ goes when a ':' precedes it.
func quoteURL(raw string) string {
	s := RedactURL(raw)
	if at := strings.LastIndex(s, "@"); at >= 0 {
		head := s[:at]
		if i := strings.Index(head, "://"); i >= 0 {
			if strings.Contains(head[i+3:], ":") {
				s = head[:i+3] + s[at+1:]
			}
		} else if strings.Contains(head, ":") {
			s = s[at+1:]
		}
	}
	return `"` + clean(s, 300) + `"`
}

// clean makes text a server or a user chose safe to show in a status message: control and
// bidirectional-formatting characters become '?', invalid UTF-8 is replaced, and the text is
// cut to at most max bytes.
func clean(s string, max int) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "?") {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == utf8.RuneError {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r) > max {
			b.WriteString("...")
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
