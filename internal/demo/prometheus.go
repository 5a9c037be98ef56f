package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// FindPrometheus returns the prometheus binary: on PATH, else installed with Debian's apt-get
// when this is a Debian machine run as root, else an error that says how to get one.
func FindPrometheus(ctx context.Context, out io.Writer) (string, error) {
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		return "", errors.New("prometheus not found: install it (Debian: apt-get install prometheus) or put it on PATH")
	}
	fmt.Fprintln(out, "installing Debian's prometheus package (once)...")
	cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "--no-install-recommends", "prometheus")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if data, err := cmd.CombinedOutput(); err != nil {
		update := exec.CommandContext(ctx, "apt-get", "update")
		if _, uerr := update.CombinedOutput(); uerr != nil {
			return "", fmt.Errorf("apt-get install prometheus: %w\n%s", err, data)
		}
		if data, err := exec.CommandContext(ctx, "apt-get", "install", "-y", "--no-install-recommends", "prometheus").CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get install prometheus: %w\n%s", err, data)
		}
	}
	return exec.LookPath("prometheus")
}

// Prometheus is a private Prometheus server scraping one target every second.
type Prometheus struct {
	URL string
	cmd *exec.Cmd
}

// StartPrometheus runs binary with its data and config under dir, scraping target.
func StartPrometheus(ctx context.Context, binary, dir, target string) (*Prometheus, error) {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
- job_name: demo-traffic
  static_configs:
  - targets: [%q]
`, target)
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, "--config.file="+configPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting prometheus: %w", err)
	}
	p := &Prometheus{URL: "http://" + addr, cmd: cmd}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.Stop()
			return nil, fmt.Errorf("prometheus not ready after 30s; see %s", logFile.Name())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop ends the server.
func (p *Prometheus) Stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}
