package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHostsDefaultsAndValues(t *testing.T) {
	old := currentUser
	currentUser = func() string { return "alice" }
	t.Cleanup(func() { currentUser = old })
	key := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(key, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := `
[[hosts]]
name = "bastion"
address = "bastion.lab"

[[hosts]]
name = "gpu2"
address = "10.0.0.2:2222"
user = "bob"
identity_file = "` + key + `"
known_hosts = "/etc/trainbot/known_hosts"
jump = "bastion"
trainbot = "/opt/trainbot/bin/trainbot"
data_dir = "/scratch/trainbot"

[[hosts]]
name = "v6"
address = "[fe80::1]:22"
`
	c, err := parse(t, doc)
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	want := []HostConfig{
		{Name: "bastion", Address: "bastion.lab:22", User: "alice", KnownHosts: filepath.Join(home, ".ssh/known_hosts"), Trainbot: "trainbot"},
		{Name: "gpu2", Address: "10.0.0.2:2222", User: "bob", IdentityFile: key, KnownHosts: "/etc/trainbot/known_hosts", Jump: "bastion",
			Trainbot: "/opt/trainbot/bin/trainbot", DataDir: "/scratch/trainbot"},
		{Name: "v6", Address: "[fe80::1]:22", User: "alice", KnownHosts: filepath.Join(home, ".ssh/known_hosts"), Trainbot: "trainbot"},
	}
	if len(c.Hosts) != len(want) {
		t.Fatalf("got %d hosts, want %d", len(c.Hosts), len(want))
	}
	for i := range want {
		if c.Hosts[i] != want[i] {
			t.Errorf("hosts[%d] = %+v, want %+v", i, c.Hosts[i], want[i])
		}
	}
	if h := c.Host("gpu2"); h == nil || h.Jump != "bastion" || c.Host("nope") != nil {
		t.Errorf("Host(gpu2) = %+v", h)
	}
}

func TestHostsErrorsNameKeyAndLine(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"no name", "[[hosts]]\naddress = \"a\"\n", "test.toml:1: hosts[0]: name: a host needs a name"},
		{"bad name", "[[hosts]]\nname = \"GPU_2\"\naddress = \"a\"\n", "test.toml:2: hosts[0] (GPU_2): name: want lowercase letters, digits and '-'"},
		{"duplicate", "[[hosts]]\nname = \"a\"\naddress = \"a\"\n[[hosts]]\nname = \"a\"\naddress = \"b\"\n", "test.toml:5: hosts[1] (a): name: host \"a\" is already defined by hosts[0]"},
		{"no address", "[[hosts]]\nname = \"a\"\n", "hosts[0] (a): address: a host needs an address"},
		{"bad port", "[[hosts]]\nname = \"a\"\naddress = \"a:99999\"\n", "test.toml:3: hosts[0] (a): address: want a port from 1 to 65535 in \"a:99999\""},
		{"missing key file", "[[hosts]]\nname = \"a\"\naddress = \"a\"\nidentity_file = \"/nonexistent/id\"\n", "test.toml:4: hosts[0] (a): identity_file: \"/nonexistent/id\" is not a readable key file"},
		{"unknown jump", "[[hosts]]\nname = \"a\"\naddress = \"a\"\njump = \"b\"\n", "test.toml:4: hosts[0] (a): jump: \"b\" is not the name of a [[hosts]] entry"},
		{"jump to itself", "[[hosts]]\nname = \"a\"\naddress = \"a\"\njump = \"a\"\n", "hosts[0] (a): jump: jumps go round in a circle: a → a"},
		{"a circle", "[[hosts]]\nname = \"a\"\naddress = \"a\"\njump = \"b\"\n[[hosts]]\nname = \"b\"\naddress = \"b\"\njump = \"a\"\n",
			"test.toml:4: hosts[0] (a): jump: jumps go round in a circle: a → b → a"},
		{"unknown key", "[[hosts]]\nname = \"a\"\naddress = \"a\"\nport = 22\n", "test.toml:4: hosts[0].port"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(t, c.doc)
			if err == nil || !strings.Contains(err.Error(), c.want) || !IsInvalid(err) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
