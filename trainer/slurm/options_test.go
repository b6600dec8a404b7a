package slurm

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestValidateAccepts(t *testing.T) {
	for _, o := range []Options{
		{},
		{Partition: "gpu", Time: "30", Nodes: 1, NtasksPerNode: 4, CPUsPerTask: 8, GPUs: "4", Mem: "64G", Account: "lab", QOS: "normal"},
		{Partition: "gpu,cpu", GPUs: "a100:2", Mem: "500M"},
		{GPUs: "a100:2,v100:1", Mem: "0"},
		{Mem: "16gb"},
		{Time: "30:00"}, {Time: "12:30:00"}, {Time: "2-12"}, {Time: "2-12:30"}, {Time: "2-12:30:15"},
		{Time: "UNLIMITED"}, {Time: "infinite"},
		{ExtraArgs: []string{"--begin=now+1hour", "--constraint", "a100", "--exclusive", "-x", "node01"}},
		{ExtraArgs: []string{"--requeue", "--signal=USR1@60", "--exclude=n[1-3]", "--export=ALL,FOO=1"}},
	} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		o             Options
		field, detail string // both must be in the error
	}{
		{Options{Time: "1h"}, "time", `"1h"`},
		{Options{Time: "1:2:3:4"}, "time", `"1:2:3:4"`},
		{Options{Time: "-1-2"}, "time", `"-1-2"`},
		{Options{Time: "1-"}, "time", `"1-"`},
		{Options{Time: " 30"}, "time", `" 30"`},
		{Options{Partition: "gpu big"}, "partition", `"gpu big"`},
		{Options{Partition: "--wrap=x"}, "partition", `"--wrap=x"`},
		{Options{Account: "a\nb"}, "account", `"a\nb"`},
		{Options{QOS: "-high"}, "qos", `"-high"`},
		{Options{Nodes: -1}, "nodes", `"-1"`},
		{Options{NtasksPerNode: -2}, "ntasks_per_node", `"-2"`},
		{Options{CPUsPerTask: -3}, "cpus_per_task", `"-3"`},
		{Options{GPUs: "0"}, "gpus", `"0"`},
		{Options{GPUs: "a100"}, "gpus", `"a100"`},
		{Options{GPUs: "gpu:a100:2"}, "gpus", `"gpu:a100:2"`},
		{Options{Mem: "16GiB"}, "mem", `"16GiB"`},
		{Options{Mem: "-1G"}, "mem", `"-1G"`},
		{Options{Mem: "1.5G"}, "mem", `"1.5G"`},
		{Options{ExtraArgs: []string{""}}, "extra_args[0]", `""`},
		{Options{ExtraArgs: []string{"script.sh"}}, "extra_args[0]", "not an option"},
		{Options{ExtraArgs: []string{"--exclusive=user", "oops"}}, "extra_args[1]", "not an option"},
		{Options{ExtraArgs: []string{"--output=/tmp/x"}}, "extra_args[0]", "--output"},
		{Options{ExtraArgs: []string{"-o", "/tmp/x"}}, "extra_args[0]", "--output"},
		{Options{ExtraArgs: []string{"-e/tmp/x"}}, "extra_args[0]", "--error"},
		{Options{ExtraArgs: []string{"--job-name", "x"}}, "extra_args[0]", "--job-name"},
		{Options{ExtraArgs: []string{"-Jx"}}, "extra_args[0]", "--job-name"},
		{Options{ExtraArgs: []string{"--chdir=/"}}, "extra_args[0]", "--chdir"},
		{Options{ExtraArgs: []string{"--open-mode=truncate"}}, "extra_args[0]", "--open-mode"},
		{Options{ExtraArgs: []string{"--wrap=rm -rf ~"}}, "extra_args[0]", "--wrap"},
		{Options{ExtraArgs: []string{"--array=1-10"}}, "extra_args[0]", "--array"},
		{Options{ExtraArgs: []string{"--parsable"}}, "extra_args[0]", "--parsable"},
		{Options{ExtraArgs: []string{"--wait"}}, "extra_args[0]", "--wait"},
	} {
		err := tc.o.Validate()
		if err == nil {
			t.Errorf("%+v: no error", tc.o)
			continue
		}
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%+v: %v does not wrap ErrInvalidOption", tc.o, err)
		}
		if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("%+v: got %q, want it to name %s and %s", tc.o, err, tc.field, tc.detail)
		}
	}
}

func TestOptionArgs(t *testing.T) {
	o := Options{Partition: "gpu", Time: "1-00:00:00", Nodes: 2, NtasksPerNode: 4, CPUsPerTask: 8,
		GPUs: "a100:8", Mem: "0", Account: "lab", QOS: "high", ExtraArgs: []string{"--constraint", "ib"}}
	want := []string{"--partition=gpu", "--time=1-00:00:00", "--nodes=2", "--ntasks-per-node=4",
		"--cpus-per-task=8", "--gpus=a100:8", "--mem=0", "--account=lab", "--qos=high", "--constraint", "ib"}
	if got := o.args(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := (Options{}).args(); len(got) != 0 {
		t.Errorf("zero Options: got %q, want nothing", got)
	}
}
