package pull

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// A bootstrap token is ID.SECRET: the ID names its Secret in flotilla-system, which keeps only
// the SECRET's SHA-256, the one cluster name it registers and when it expires. It registers
// once: the Secret is deleted by the registration that used it.
const (
	tokenSecretPrefix = "agent-bootstrap-"
	// TokenClusterLabel names the cluster a token registers.
	TokenClusterLabel = "pull.flotilla.dev/cluster"
	tokenHashKey      = "token-sha256"
	tokenExpiresKey   = "expiration"
	// DefaultTokenTTL is how long a printed bootstrap token registers.
	DefaultTokenTTL = time.Hour
	// MaxTokenTTL bounds a token's life: a leaked unused token registers until it expires.
	MaxTokenTTL = 7 * 24 * time.Hour
)

var tokenPattern = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{32})$`)

// Token is a bootstrap token.
type Token struct{ ID, Secret string }

func (t Token) String() string { return t.ID + "." + t.Secret }

// ParseToken reads ID.SECRET.
func ParseToken(s string) (Token, error) {
	m := tokenPattern.FindStringSubmatch(s)
	if m == nil {
		return Token{}, errors.New("the bootstrap token is not ID.SECRET (6 and 32 lowercase letters and digits) as flotilla join --mode Pull prints it")
	}
	return Token{ID: m[1], Secret: m[2]}, nil
}

func tokenSecretName(id string) string { return tokenSecretPrefix + id }

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func randomString(n int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b), nil
}

// NewToken stores a bootstrap token that registers cl until ttl has passed, and returns it.
// Earlier unused tokens of the cluster stay valid until they expire or the cluster registers;
// all go with the Cluster (it owns them).
func NewToken(ctx context.Context, c client.Client, cl *clusterv1alpha1.Cluster, ttl time.Duration, now time.Time) (Token, time.Time, error) {
	cluster := cl.Name
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	id, err := randomString(6)
	if err != nil {
		return Token{}, time.Time{}, err
	}
	secret, err := randomString(32)
	if err != nil {
		return Token{}, time.Time{}, err
	}
	expires := now.Add(ttl).UTC().Truncate(time.Second)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: kube.SystemNamespace, Name: tokenSecretName(id),
			Labels:          map[string]string{TokenClusterLabel: cluster},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1alpha1.GroupVersion.String(), Kind: "Cluster", Name: cl.Name, UID: cl.UID}}},
		Type: "pull.flotilla.dev/bootstrap-token",
		StringData: map[string]string{
			tokenHashKey:    hashSecret(secret),
			tokenExpiresKey: expires.Format(time.RFC3339),
		},
	}
	if err := c.Create(ctx, s); err != nil {
		return Token{}, time.Time{}, fmt.Errorf("storing the bootstrap token: %w", err)
	}
	return Token{ID: id, Secret: secret}, expires, nil
}

// errToken is a refused token; its message is safe to show the caller.
type errToken struct{ msg string }

func (e errToken) Error() string { return e.msg }

// checkToken returns tok's Secret when it registers cluster now. A token of another cluster
// is refused and kept (its own cluster may still use it), as is an expired one (it goes when
// its cluster registers, or with its Cluster).
func checkToken(ctx context.Context, c client.Reader, tok Token, cluster string, now time.Time) (*corev1.Secret, error) {
	unknown := errToken{"the bootstrap token is not known: it was used already, expired or never issued; run flotilla join " + cluster + " --mode Pull for a new one"}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: tokenSecretName(tok.ID)}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, unknown
		}
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(hashSecret(tok.Secret)), s.Data[tokenHashKey]) != 1 {
		return nil, unknown
	}
	if owner := s.Labels[TokenClusterLabel]; owner != cluster {
		return nil, errToken{fmt.Sprintf("the bootstrap token registers cluster %s, not %s: a token is made for one cluster name", owner, cluster)}
	}
	expires, err := time.Parse(time.RFC3339, string(s.Data[tokenExpiresKey]))
	if err != nil || !now.Before(expires) {
		return nil, errToken{fmt.Sprintf("the bootstrap token expired at %s; run flotilla join %s --mode Pull for a new one", expires.Format(time.RFC3339), cluster)}
	}
	return s, nil
}

// dropTokens deletes every bootstrap token of cluster (after it registered).
func dropTokens(ctx context.Context, r client.Reader, c client.Client, cluster string) error {
	list := &corev1.SecretList{}
	if err := r.List(ctx, list, client.InNamespace(kube.SystemNamespace), client.MatchingLabels{TokenClusterLabel: cluster}); err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		if err := c.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// useToken deletes the token's Secret; with its UID as precondition, so of two registrations
// racing with one token only one gets through.
func useToken(ctx context.Context, c client.Client, s *corev1.Secret) error {
	if err := c.Delete(ctx, s, client.Preconditions{UID: &s.UID}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return errToken{"the bootstrap token was used already; run flotilla join " + s.Labels[TokenClusterLabel] + " --mode Pull for a new one"}
		}
		return err
	}
	return nil
}
