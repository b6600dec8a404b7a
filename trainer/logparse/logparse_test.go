package logparse

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// lineCase is a few lines of output, the points they hold and, when set,
// where the run stands after them.
type lineCase struct {
	name     string
	patterns []string
	opts     []Option
	lines    []string
	want     []string
	progress string
}

func runLineCases(t *testing.T, cases []lineCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.patterns, tc.opts...)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got := parseLines(p, tc.lines)
			diffLines(t, got, tc.want)
			if tc.progress != "" {
				if pr := progressString(p.Progress()); pr != tc.progress {
					t.Errorf("progress: got %q, want %q", pr, tc.progress)
				}
			}
		})
	}
}

func TestFormats(t *testing.T) {
	runLineCases(t, []lineCase{
		{name: "json object",
			lines: []string{`{"step": 100, "epoch": 1, "loss": 0.6123, "acc": 0.91}`},
			want:  []string{"100 1 loss=0.6123", "100 1 acc=0.91"}, progress: "step 100/? epoch 1/?"},
		{name: "json nested, strings, bools, arrays skipped",
			lines: []string{`{"global_step": 7, "train": {"loss": 0.5, "Top-1 Acc": 75.5}, "run": "a", "ok": true, "x": null, "h": [1, {"a": 2}]}`},
			want:  []string{"7 - train/loss=0.5", "7 - train/top-1_acc=75.5"}},
		{name: "json after a logging prefix",
			lines: []string{`2024-05-01 12:00:01 INFO metrics {"step": 3, "loss": 1.5}`},
			want:  []string{"3 - loss=1.5"}},
		{name: "json name/value (trainbot parse --json reads back)",
			lines: []string{`{"step":100,"epoch":1,"name":"loss","value":0.6123}`, `{"step":101,"name":"loss","value":"NaN"}`, `{"step":102,"name":"Val Loss","value":"-Inf"}`},
			want:  []string{"100 1 loss=0.6123", "101 1 loss=NaN", "102 1 val loss=-Inf"}},
		{name: "hf dict",
			lines: []string{`{'loss': 0.6931, 'learning_rate': 4.5e-05, 'epoch': 0.1}`},
			want:  []string{"1 0.1 loss=0.6931", "1 0.1 learning_rate=4.5e-05"}, progress: "step 1/? epoch 0.1/?"},
		{name: "hf dict with tensors and numpy scalars",
			lines: []string{`{'loss': tensor(0.5312, device='cuda:0'), 'grad_norm': np.float64(2.25), 'lr': np.float32(1e-4), 'epoch': 0.5}`},
			want:  []string{"1 0.5 loss=0.5312", "1 0.5 grad_norm=2.25", "1 0.5 lr=0.0001"}},
		{name: "python dict after text",
			lines: []string{`Epoch 3: {'val_loss': 0.25, 'val_acc': 0.9}`},
			want:  []string{"1 3 val_loss=0.25", "1 3 val_acc=0.9"}},
		{name: "key=value",
			lines: []string{`step=100 loss=0.5 lr=3e-4 grad_norm=1.5`},
			want:  []string{"100 - loss=0.5", "100 - lr=0.0003", "100 - grad_norm=1.5"}},
		{name: "key: value with qualifiers",
			lines: []string{`Epoch 2 | Train Loss: 0.40 | Val Loss: 0.45 | Best Acc: 91.2%`},
			want:  []string{"1 2 train_loss=0.4", "1 2 val_loss=0.45", "1 2 best_acc=91.2"}},
		{name: "keras tf2",
			lines: []string{"Epoch 1/10", "469/469 [==============================] - 3s 6ms/step - loss: 0.2950 - accuracy: 0.9150"},
			want:  []string{"469 1 loss=0.295", "469 1 accuracy=0.915"}, progress: "step 469/4690 epoch 1/10"},
		{name: "keras mid-epoch with ETA",
			lines: []string{"Epoch 2/10", " 57/469 [==>...........................] - ETA: 2s - loss: 0.9876 - accuracy: 0.7123"},
			want:  []string{"526 2 loss=0.9876", "526 2 accuracy=0.7123"}, progress: "step 526/4690 epoch 2/10"},
		{name: "keras verbose=2",
			lines: []string{"Epoch 1/2", "469/469 - 3s - loss: 0.2950 - accuracy: 0.9150 - 3s/epoch - 6ms/step"},
			want:  []string{"469 1 loss=0.295", "469 1 accuracy=0.915"}},
		{name: "tqdm postfix",
			lines: []string{"Epoch 1/3:  45%|████▌     | 45/100 [00:03<00:04, 12.31it/s, loss=0.123, acc=0.95]"},
			want:  []string{"45 1 loss=0.123", "45 1 acc=0.95"}, progress: "step 45/300 epoch 1/3"},
		{name: "tqdm with carriage returns in one line",
			lines: []string{"\r 10%|█         | 10/100 [00:01<00:09,  9.80it/s, loss=2.1]\r 20%|██        | 20/100 [00:02<00:08,  9.81it/s, loss=1.7]\r 20%|██        | 20/100 [00:02<00:08,  9.81it/s, loss=1.7]"},
			want:  []string{"10 - loss=2.1", "20 - loss=1.7"}},
		{name: "tqdm unknown total",
			lines: []string{"Epoch 0: 50it [00:05,  9.50it/s, loss=0.5]"},
			want:  []string{"50 0 loss=0.5"}},
		{name: "lightning postfix, v_num ignored",
			lines: []string{"Epoch 0:  50%|█████     | 32/63 [00:01<00:01, 25.00it/s, v_num=3, train_loss_step=0.693]"},
			want:  []string{"32 0 train_loss_step=0.693"}, progress: "step 32/? epoch 0/?"},
		{name: "classic",
			lines: []string{"Epoch [2/10], Step [100/600], Loss: 0.2345"},
			want:  []string{"700 2 loss=0.2345"}, progress: "step 700/6000 epoch 2/10"},
		{name: "classic variations",
			lines: []string{"epoch: [3/5]  iter: [40/50]  lr: 0.01  loss: 1.25", "Epoch 4 of 5, batch 10/50, loss = 0.5"},
			want:  []string{"140 3 lr=0.01", "140 3 loss=1.25", "160 4 loss=0.5"}, progress: "step 160/250 epoch 4/5"},
		{name: "mmcv style",
			lines: []string{"Epoch [1][50/500]\tlr: 1.000e-02, eta: 0:10:00, time: 0.500, data_time: 0.050, memory: 3000, loss_cls: 0.5, loss: 1.2"},
			want:  []string{"50 1 lr=0.01", "50 1 time=0.5", "50 1 data_time=0.05", "50 1 memory=3000", "50 1 loss_cls=0.5", "50 1 loss=1.2"}},
		{name: "ansi colours",
			lines: []string{"\x1b[32m2024-05-01 12:00:01\x1b[0m | \x1b[1mINFO\x1b[0m | step \x1b[36m100\x1b[0m: loss=\x1b[33m0.5\x1b[0m"},
			want:  []string{"100 - loss=0.5"}},
		{name: "logging prefixes are not metrics",
			lines: []string{
				"2024-05-01 12:00:01,123 - INFO - step 100: loss=0.5",
				"[2024-05-01 12:00:02,000][train.py:42][INFO] - step 200: loss=0.4",
				"I0501 12:00:03.123456 140213 trainer.py:88] step 300 loss=0.3",
				"2024-05-01 12:00:04.000 | INFO     | __main__:train:42 - step 400 | loss: 0.2",
				"INFO:root:step 500 loss=0.1",
			},
			want: []string{"100 - loss=0.5", "200 - loss=0.4", "300 - loss=0.3", "400 - loss=0.2", "500 - loss=0.1"}},
		{name: "lr schedules are metrics, bookkeeping is not",
			lines: []string{"step=10 lr=0.001 learning_rate=0.001 seed=42 rank=0 local_rank=0 world_size=8 pid=1234 v_num=0 batch_size=64 loss=1"},
			want:  []string{"10 - lr=0.001", "10 - learning_rate=0.001", "10 - loss=1"}},
		{name: "units, clocks and rates are not values, but memory with a byte unit is bytes",
			lines: []string{"step 5: loss=0.5 time: 3s eta: 0:01:23 speed: 12ms/step mem: 3.1GB size: 3 MB date: 2024-05-01 elapsed: 00:05"},
			want:  []string{"5 - loss=0.5", "5 - mem=3.1e+09"}},
		{name: "counts are not metrics",
			lines: []string{"Training finished: 300 steps, loaded: 60000 examples, throughput: 1,234.5 samples/s"},
			want:  []string{"1 - throughput=1234.5"}},
		{name: "prose names",
			lines: []string{"Test Accuracy of the model on the 10000 test images: 97.8 %", "Accuracy of the network on the 10000 test images: 54 %"},
			want:  []string{"1 - test_accuracy=97.8", "1 - accuracy=54"}},
		{name: "configuration echoes",
			lines: []string{
				"[INFO|trainer.py:2049] 2024-05-01 12:00:01,123 >>   Num examples = 25,000",
				"[INFO|trainer.py:2050] 2024-05-01 12:00:01,123 >>   Num Epochs = 3",
				"[INFO|trainer.py:2055] 2024-05-01 12:00:01,123 >>   Gradient Accumulation steps = 4",
				"[INFO|trainer.py:2056] 2024-05-01 12:00:01,123 >>   Total optimization steps = 9,375",
				"[INFO|trainer.py:2057] 2024-05-01 12:00:01,123 >>   Number of trainable parameters = 66,955,010",
				"args: epochs=3 max_steps=9375 warmup_steps=500 log_every=10 steps per epoch: 3125",
			},
			want: nil, progress: "step 0/9375 epoch ?/3"},
		{name: "object reprs are configuration, their totals count",
			lines: []string{
				"  (0): Linear(in_features=784, out_features=128, bias=True)",
				"Namespace(batch_size=64, epochs=14, lr=1.0, gamma=0.7, seed=1, log_interval=10)",
				"Adam (\nParameter Group 0\n    lr: 0.001\n)",
				"TrainOutput(global_step=500, training_loss=0.4151, metrics={'train_runtime': 101.2})",
			},
			want: nil, progress: "step 0/? epoch ?/14"},
		{name: "multi-line reprs are configuration, their totals count",
			lines: []string{
				"[INFO|trainer.py:2025] 2024-05-01 12:00:00,000 >> Training/evaluation parameters TrainingArguments(",
				"_n_gpu=1,", "fsdp_config={'min_num_params': 0, 'xla': False},", "learning_rate=5e-05,", "max_steps=-1,",
				"num_train_epochs=3.0,", "seed=42,", "warmup_ratio=0.1,", ")",
				"SGD (", "Parameter Group 0", "    lr: 0.5", "    momentum: 0.9", ")",
				"Net(", "  (fc): Sequential(", "    (0): Linear(in_features=4, out_features=16, bias=True)", "  )", ")",
				"step 1: loss=0.5",
			},
			want: []string{"1 - loss=0.5"}, progress: "step 1/? epoch ?/3"},
		{name: "a repr block that never closes ends after a while",
			lines: append(append([]string{"Model("}, strings.Split(strings.Repeat("x=1\n", maxReprLines+1), "\n")...), "loss=0.5"),
			want:  []string{"1 - loss=0.5"}},
		{name: "parameter counts are not metrics (Keras summary)",
			lines: []string{" Total params: 101,770 (397.54 KB)", " Trainable params: 101,770 (397.54 KB)", " Non-trainable params: 0 (0.00 B)"},
			want:  nil},
		{name: "pytorch tensor repr in text",
			lines: []string{"step 800: loss=tensor(0.3312, device='cuda:0', grad_fn=<NllLossBackward0>) acc=0.9"},
			want:  []string{"800 - loss=0.3312", "800 - acc=0.9"}},
		{name: "quoted keys of pretty-printed json",
			lines: []string{"{", `  "step": 12,`, `  "loss": 0.25,`, `  "note": "x"`, "}"},
			want:  []string{"12 - loss=0.25"}},
		{name: "key value with a printed tensor",
			lines: []string{"Epoch 0, step 1, loss tensor(1.1387, grad_fn=<NllLossBackward0>)"},
			want:  []string{"1 0 loss=1.1387"}},
		{name: "key value on a line with a step (nanoGPT)",
			lines: []string{"iter 100: loss 2.4567, time 123.45ms, mfu 12.34%", "step 100: train loss 2.4012, val loss 2.5678"},
			want:  []string{"100 - loss=2.4567", "100 - mfu=12.34", "100 - train_loss=2.4012", "100 - val_loss=2.5678"}},
		{name: "key value on a line with a counter (PyTorch ImageNet example)",
			lines: []string{"Epoch: [0][ 100/5005]\tTime  0.234 ( 0.456)\tData  0.001 ( 0.123)\tLoss 6.8534e+00 (6.9012e+00)\tAcc@1   0.39 (  0.12)\tAcc@5   1.95 (  0.78)"},
			want:  []string{"100 0 time=0.234", "100 0 data=0.001", "100 0 loss=6.8534", "100 0 acc@1=0.39", "100 0 acc@5=1.95"}, progress: "step 100/? epoch 0/?"},
		{name: "key value without a step is prose",
			lines: []string{"Using Python 3.10 and CUDA 12.1", "Epoch 3 took 35.2 s", "step 5: evaluating on 1000 examples, seed 42, batch 64"},
			want:  nil},
		{name: "first value of a name on a line wins",
			lines: []string{"step 1 loss: 0.2 (avg loss: 0.3) loss=0.9"},
			want:  []string{"1 - loss=0.2", "1 - avg_loss=0.3"}},
	})
}

func TestSteps(t *testing.T) {
	runLineCases(t, []lineCase{
		{name: "counted: a repeated name starts a step",
			lines:    []string{"loss: 0.9", "val_loss: 1.0", "loss: 0.8", "loss: 0.7 acc: 0.5", "acc: 0.6"},
			want:     []string{"1 - loss=0.9", "1 - val_loss=1", "2 - loss=0.8", "3 - loss=0.7", "3 - acc=0.5", "4 - acc=0.6"},
			progress: "step 4/? epoch ?/?"},
		{name: "counted: per-epoch lines",
			lines: []string{"epoch 1: loss=0.5 val_loss=0.6", "epoch 2: loss=0.4 val_loss=0.5"},
			want:  []string{"1 1 loss=0.5", "1 1 val_loss=0.6", "2 2 loss=0.4", "2 2 val_loss=0.5"}},
		{name: "printed steps win over counting, from then on",
			lines: []string{"loss: 0.9", "step 50 loss: 0.8", "val_loss: 0.7", "loss: 0.6"},
			want:  []string{"1 - loss=0.9", "50 - loss=0.8", "50 - val_loss=0.7", "50 - loss=0.6"}},
		{name: "epoch E step S restarting each epoch",
			lines: []string{"Epoch: 1, Step: 50, Loss: 0.9", "Epoch: 1, Step: 100, Loss: 0.8", "Epoch: 2, Step: 50, Loss: 0.7", "Epoch: 3, Step: 100, Loss: 0.6"},
			want:  []string{"50 1 loss=0.9", "100 1 loss=0.8", "150 2 loss=0.7", "300 3 loss=0.6"}},
		{name: "epoch E step S growing across epochs",
			lines: []string{"epoch=1 step=50 loss=0.9", "epoch=2 step=150 loss=0.8", "epoch=3 step=250 loss=0.7"},
			want:  []string{"50 1 loss=0.9", "150 2 loss=0.8", "250 3 loss=0.7"}},
		{name: "epoch E step S within a bar's epoch",
			lines: []string{
				"Epoch 2/2:  50%|█████     | 20/40 [00:01<00:01, 19.9it/s, loss=0.5]",
				"epoch 2 step 20: val_loss=0.55",
				"Epoch 1, global step 60: 'val_loss' reached 0.55000 (best 0.55000), saving model to '/ckpt/epoch=1-step=60.ckpt' as top 1",
			},
			want: []string{"60 2 loss=0.5", "60 2 val_loss=0.55"}, progress: "step 60/80 epoch 1/2"},
		{name: "step 0 is kept",
			lines: []string{"step 0: loss=2.3"},
			want:  []string{"0 - loss=2.3"}},
		{name: "json without a step attaches to the latest step",
			lines: []string{"Epoch [1/2], Step [100/100], Loss: 0.5", `{"epoch": 1, "val_loss": 0.6}`},
			want:  []string{"100 1 loss=0.5", "100 1 val_loss=0.6"}, progress: "step 100/200 epoch 1/2"},
		{name: "global step from keyed counter equal to the total",
			lines: []string{"Epoch [5/15], Step [90/100], Loss: 0.05", "Interrupted at step 490/1500"},
			want:  []string{"490 5 loss=0.05"}, progress: "step 490/1500 epoch 5/15"},
		{name: "a counter that does not restart is global",
			lines: []string{"epoch 1/3 step 250/750 loss=0.5", "epoch 2/3 step 500/750 loss=0.4", "epoch 3/3 step 750/750 loss=0.3"},
			want:  []string{"250 1 loss=0.5", "500 2 loss=0.4", "750 3 loss=0.3"}, progress: "step 750/750 epoch 3/3"},
		{name: "lightning 0-based epochs",
			lines: []string{
				"Epoch 0: 100%|██████████| 50/50 [00:01<00:00, 30.1it/s, v_num=0, loss=0.7]",
				"Epoch 1:  50%|█████     | 25/50 [00:01<00:01, 30.1it/s, v_num=0, loss=0.6]",
			},
			want: []string{"50 0 loss=0.7", "75 1 loss=0.6"}, progress: "step 75/? epoch 1/?"},
		{name: "rich 0-based epoch totals",
			lines: []string{"Epoch 0/1 ━━━━━━━━━━━━━━━━━━━━ 10/10 0:00:01 • 0:00:00 9.50it/s v_num: 0 loss: 0.5", "Epoch 1/1 ━━━━━━━━━━━━━━━━━━━━ 10/10 0:00:01 • 0:00:00 9.50it/s v_num: 0 loss: 0.4"},
			want:  []string{"1 0 loss=0.5", "2 1 loss=0.4"}, progress: "step 2/? epoch 1/2"},
		{name: "hf fractional epochs do not place the bar",
			lines: []string{
				" 40%|████      | 200/500 [00:40<01:00,  4.97it/s]",
				"{'eval_loss': 0.4, 'epoch': 1.0}",
				" 60%|██████    | 300/500 [00:60<00:40,  4.97it/s]",
				"{'loss': 0.3, 'epoch': 1.5}",
			},
			want: []string{"200 1 eval_loss=0.4", "300 1.5 loss=0.3"}, progress: "step 300/500 epoch 1.5/?"},
		{name: "hf evaluation bar is not the training loop",
			lines: []string{
				" 10%|█         | 50/500 [00:10<01:30,  4.97it/s]",
				"{'loss': 0.69, 'epoch': 0.1}",
				" 50%|█████     | 8/16 [00:00<00:00, 80.10it/s]",
				"{'eval_loss': 0.6, 'epoch': 0.1}",
				" 11%|█         | 55/500 [00:11<01:29,  4.97it/s]",
			},
			want: []string{"50 0.1 loss=0.69", "50 0.1 eval_loss=0.6"}, progress: "step 55/500 epoch 0.1/?"},
		{name: "labelled validation bars are ignored",
			lines: []string{
				"Epoch 0:  80%|████████  | 40/50 [00:01<00:00, 30.1it/s, loss=0.7]",
				"Validation DataLoader 0:  50%|█████     | 5/10 [00:00<00:00, 50.00it/s]",
				"Sanity Checking DataLoader 0: 100%|██████████| 2/2 [00:00<00:00, 95.24it/s]",
				"Testing: 100%|██████████| 80/80 [00:00<00:00, 50.00it/s, test_loss=0.8]",
			},
			want: []string{"40 0 loss=0.7", "40 0 test_loss=0.8"}, progress: "step 40/? epoch 0/?"},
		{name: "a finished preprocessing bar gives way",
			lines: []string{
				"Tokenizing: 100%|██████████| 1000/1000 [00:02<00:00, 500.00it/s]",
				"  0%|          | 0/300 [00:00<?, ?it/s]",
				" 33%|███▎      | 100/300 [00:20<00:40,  4.97it/s, loss=1.2]",
			},
			want: []string{"100 - loss=1.2"}, progress: "step 100/300 epoch ?/?"},
		{name: "a bar's percentage is not a total (diffusers' Steps bar)",
			lines: []string{"Steps:  10%|█         | 100/1000 [00:30<04:30,  3.33it/s, lr=1e-05, step_loss=0.5]"},
			want:  []string{"100 - lr=1e-05", "100 - step_loss=0.5"}, progress: "step 100/1000 epoch ?/?"},
		{name: "rates in examples/s or MB/s are not training bars",
			lines: []string{
				"Map: 100%|██████████| 25000/25000 [00:05<00:00, 4807.21 examples/s]",
				"Downloading: 100%|██████████| 570/570 [00:00<00:00, 285kB/s]",
			},
			want: nil, progress: "step 0/? epoch ?/?"},
		{name: "an outer epochs bar gives way to the inner loop",
			lines: []string{
				"  0%|          | 0/3 [00:00<?, ?it/s]",
				"  0%|          | 0/100 [00:00<?, ?it/s]",
				" 50%|█████     | 50/100 [00:05<00:05, 9.90it/s, loss=0.9]",
				" 33%|███▎      | 1/3 [00:10<00:20, 0.10it/s]",
			},
			want: []string{"50 - loss=0.9"}, progress: "step 50/100 epoch ?/?"},
		{name: "bars without an epoch count passes",
			lines: []string{
				"100%|██████████| 100/100 [00:10<00:00, 9.90it/s, loss=0.9]",
				" 50%|█████     | 50/100 [00:05<00:05, 9.90it/s, loss=0.8]",
			},
			want: []string{"100 - loss=0.9", "150 - loss=0.8"}, progress: "step 150/? epoch ?/?"},
		{name: "keras evaluate after fit keeps the step",
			lines: []string{"Epoch 2/2", "469/469 [====] - 3s 6ms/step - loss: 0.12", "313/313 [====] - 1s 2ms/step - loss: 0.09"},
			want:  []string{"938 2 loss=0.12", "938 2 loss=0.09"}, progress: "step 938/938 epoch 2/2"},
		{name: "bare counters need metrics",
			lines: []string{"[1/8] c++ -c ops.cpp -o ops.o", "[2/8] nvcc -c kernel.cu", "loss: 0.5"},
			want:  []string{"1 - loss=0.5"}, progress: "step 1/? epoch ?/?"},
		{name: "checkpoint and eval mentions of a step are not progress",
			lines: []string{"step 100: loss=0.5", "Saving model checkpoint at step 90", "Evaluating at step 80", "Resumed from step 100"},
			want:  []string{"100 - loss=0.5"}, progress: "step 100/? epoch ?/?"},
		{name: "explicit totals win over derived ones",
			lines: []string{"max_steps=1000", "Epoch [1/2], Step [10/100], Loss: 0.5"},
			want:  []string{"10 1 loss=0.5"}, progress: "step 10/1000 epoch 1/2"},
		{name: "bar postfix values are reported when they change",
			lines: []string{
				"Epoch 0: 100%|██████████| 10/10 [00:01<00:00, 9.9it/s, loss=0.5]",
				"Epoch 0: 100%|██████████| 10/10 [00:01<00:00, 9.9it/s, loss=0.5, val_loss=0.6]",
				"Epoch 1:  10%|█         | 1/10 [00:00<00:01, 9.9it/s, loss=0.4, val_loss=0.6]",
				"Epoch 1:  20%|██        | 2/10 [00:00<00:01, 9.9it/s, loss=0.4, val_loss=0.6]",
				"Epoch 1:  30%|███       | 3/10 [00:00<00:01, 9.9it/s, loss=nan, val_loss=0.6]",
				"Epoch 1:  40%|████      | 4/10 [00:00<00:01, 9.9it/s, loss=nan, val_loss=0.6]",
			},
			want: []string{"10 0 loss=0.5", "10 0 val_loss=0.6", "11 1 loss=0.4", "13 1 loss=NaN"}},
	})
}

func TestNaNAndInf(t *testing.T) {
	lines := []string{
		"step 1 loss: nan", "step 2 loss=NaN", "step 3 loss: inf", "step 4 loss: -inf", "step 5 loss=Infinity",
		"step 6 loss: -Infinity", "step 7 loss=+inf", `{"step": 8, "loss": NaN}`, `{"step": 9, "loss": Infinity}`,
		`{"step": 10, "loss": -Infinity}`, "{'loss': nan, 'epoch': 1.0}", "{'loss': inf, 'epoch': 1.0}",
		"step 13 loss=tensor(nan, device='cuda:0')", "step 14 loss: NaN.", `{"step": 15, "name": "loss", "value": "Inf"}`,
		"step 16 loss: nan%", "Epoch [1/1], Step [17/100], Loss: nan",
	}
	want := []float64{math.NaN(), math.NaN(), math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1), math.Inf(1),
		math.NaN(), math.Inf(1), math.Inf(-1), math.NaN(), math.Inf(1), math.NaN(), math.NaN(), math.Inf(1), math.NaN(), math.NaN()}
	p := &Parser{}
	for i, l := range lines {
		pts := p.Line(l)
		if len(pts) != 1 || pts[0].Name != "loss" {
			t.Errorf("%q: got %v, want one loss point", l, pts)
			continue
		}
		if got := pts[0].Value; !sameValue(got, want[i]) {
			t.Errorf("%q: got %v, want %v", l, got, want[i])
		}
	}
	// Words that merely start like nan or inf are not values.
	for _, l := range []string{"loss: NaNs detected", "loss: infinite", "loss: none", "loss: nano"} {
		if pts := (&Parser{}).Line(l); len(pts) != 0 {
			t.Errorf("%q: got %v, want no points", l, pts)
		}
	}
}

func TestCustomPatterns(t *testing.T) {
	runLineCases(t, []lineCase{
		{name: "named groups are metrics, step is the global step",
			patterns: []string{`(?P<step>\d+) updates \| loss (?P<loss>\S+) \| ppl (?P<ppl>\S+)`},
			lines:    []string{"train | 1200 updates | loss 2.31 | ppl 9.87", "train | 1300 updates | loss 2.29 | ppl 9.61"},
			want:     []string{"1200 - loss=2.31", "1200 - ppl=9.87", "1300 - loss=2.29", "1300 - ppl=9.61"}, progress: "step 1300/? epoch ?/?"},
		{name: "without the pattern that format has no points",
			lines: []string{"train | 1200 updates | loss 2.31 | ppl 9.87"},
			want:  nil},
		{name: "step and total_steps together are a counter",
			patterns: []string{`ep(?P<epoch>\d+) it(?P<step>\d+)/(?P<total_steps>\d+) L=(?P<loss>\S+)`},
			lines:    []string{"ep1 it50/100 L=0.5", "ep2 it10/100 L=0.4"},
			want:     []string{"50 1 l=0.5", "50 1 loss=0.5", "110 2 l=0.4", "110 2 loss=0.4"}, progress: "step 110/? epoch 2/?"},
		{name: "a pattern's value replaces the built-in one; total_epochs",
			patterns: []string{`loss=(?P<loss>[0-9.]+)/(?P<total_epochs>\d+)`},
			lines:    []string{"step=3 loss=0.25/10"},
			want:     []string{"3 - loss=0.25"}, progress: "step 3/? epoch ?/10"},
		{name: "all patterns apply",
			patterns: []string{`a(?P<a>\d)`, `b(?P<b>\d)`},
			lines:    []string{"xa1 yb2"},
			want:     []string{"1 - a=1", "1 - b=2"}},
		{name: "a group that is not a number is skipped",
			patterns: []string{`loss (?P<loss>\S+)`},
			lines:    []string{"loss high"},
			want:     nil},
	})

	if _, err := CompilePattern(`loss (\d+)`); !errors.Is(err, errNoNamedGroup) {
		t.Errorf("no named group: got %v, want errNoNamedGroup", err)
	}
	if _, err := New([]string{`(?P<loss>[`}); err == nil {
		t.Error("bad regexp: got no error")
	}
}

func TestWeirdLines(t *testing.T) {
	long := "loss=0.5 " + strings.Repeat("x", 1<<20)
	binary := string([]byte{0x00, 0xff, 0xfe, 0x1b, '[', '3', '1', 'm', 0x80, 0x81, '{', '"', 0xc3, 0x28, '"', ':', '1', '}'})
	runLineCases(t, []lineCase{
		{name: "binary garbage and invalid utf-8",
			lines: []string{binary, "\xff\xfe\xfd", "loss=\xff0.5", "\x00\x01\x02\x03"},
			want:  nil},
		{name: "a key with invalid utf-8 is not a name",
			lines: []string{"{\"lo\xffss\": 0.5, \"acc\": 0.9}"},
			want:  []string{"1 - acc=0.9"}},
		{name: "a 1 MB line is read up to MaxLineLen",
			lines: []string{long, strings.Repeat("a=1 ", 1<<18)},
			want:  []string{"1 - loss=0.5", "1 - a=1"}},
		{name: "huge and tiny numbers",
			lines: []string{"step 99999999999999999999 loss=1e400 acc=1e-400 x=" + strings.Repeat("9", 500), "step=1234567890123 loss=1", "step=12345678901234567 loss=2"},
			want:  []string{"1 - acc=0", "1234567890123 - loss=1", "1234567890123 - loss=2"}},
		{name: "unbalanced and deep objects",
			lines: []string{"{{{{{{{{{{", "}}}}}}", `{"a": {"b": {"c": {"d": {"e": 1}}}}, "loss": 2}`, `{"loss": (1, 2}`, `{'a': 'unterminated}`},
			want:  []string{"1 - loss=2"}},
		{name: "a tensor without a number",
			lines: []string{"loss: tensor([0.5, 0.6], device='cuda:0')", "{'loss': tensor([0.5, 0.6])}"},
			want:  nil},
		{name: "carriage returns only",
			lines: []string{"\r\r\r", "\r \r", ""},
			want:  nil},
		{name: "negative and fractional steps are not steps",
			lines: []string{"step -5 loss=1", `{"step": -3, "loss": 2}`, `{"step": 2.5, "loss": 3}`},
			want:  []string{"1 - loss=1", "2 - loss=2", "3 - loss=3"}},
		{name: "garbage ending with ( opens no repr block",
			lines: []string{"\x8a\x01zq(", "\xff\xfe(", "loss=0.25"},
			want:  []string{"1 - loss=0.25"}},
		{name: "an unclosed ( on a line does not silence the rest of it",
			lines: []string{"\xfcu(\x9a\x95 loss=0.25 \xc3("},
			want:  []string{"1 - loss=0.25"}},
		{name: "an unclosed repr ends at a line with progress",
			lines: []string{"model = Net(", "  (fc): Linear(in_features=20, out_features=4)", "Epoch [1/2], Step [5/10], Loss: 0.5"},
			want:  []string{"5 1 loss=0.5"}},
		{name: "osc and other escapes",
			lines: []string{"\x1b]0;title\x07step 9 \x1b(Bloss=0.5\x1b[K"},
			want:  []string{"9 - loss=0.5"}},
	})
}

func TestClean(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"  plain  ", "plain"},
		{"a\rb\r", "b"},
		{"bar 1\rbar 2\r   \r", "bar 2"},
		{"\x1b[1;32mgreen\x1b[0m text", "green text"},
		{"keras\b\b\b\b\b\rnext", "next"},
		{"tab\there\n", "tab\there"},
		{"\x1b]0;title\x07x", "x"},
		{"\x1b", ""},
		{"\x1b[", ""},
	} {
		if got := Clean(tc.in); got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := Clean(strings.Repeat("a", MaxLineLen+10)); len(got) != MaxLineLen {
		t.Errorf("Clean of a long line: got %d bytes, want %d", len(got), MaxLineLen)
	}
}

func TestZeroParser(t *testing.T) {
	var p Parser
	pr := p.Progress()
	if pr.Step != 0 || pr.TotalSteps != 0 || !math.IsNaN(pr.Epoch) || pr.TotalEpochs != 0 {
		t.Errorf("zero progress: got %+v", pr)
	}
	if pts := p.Line(""); pts != nil {
		t.Errorf("empty line: got %v", pts)
	}
	pts := p.Line("loss=1")
	if len(pts) != 1 || pts[0].HasEpoch() {
		t.Errorf("got %v, want one point without epoch", pts)
	}
}

// TestPointsAreOwned checks that points stay valid after more lines are
// parsed (names must not alias the parser's buffers).
func TestPointsAreOwned(t *testing.T) {
	p := &Parser{}
	first := p.Line("Step 1 Train Loss: 0.5 VAL_ACC: 0.9")
	for i := 0; i < 100; i++ {
		p.Line(`{"Other Key": 1, "zzzzzzzzzzzzzzzzzzzzzzzzzzzz": 2, "step": 5}`)
	}
	got := []string{pointString(first[0]), pointString(first[1])}
	diffLines(t, got, []string{"1 - train_loss=0.5", "1 - val_acc=0.9"})
}

func TestRanks(t *testing.T) {
	runLineCases(t, []lineCase{
		{name: "torchrun role prefixes: rank 0's metrics, not a zig-zag",
			lines: []string{"[rank0]: step=10 loss=1.00", "[rank1]: step=10 loss=2.00", "[rank1]: step=20 loss=1.90", "[rank0]: step=20 loss=0.90"},
			want:  []string{"10 - loss=1", "20 - loss=0.9"}, progress: "step 20/? epoch ?/?"},
		{name: "a line without a prefix is rank 0's",
			lines: []string{"[default1]:step=5 loss=2.5", "step=5 loss=1.5", "[default1]:step=6 loss=2.4", "[default0]:step=6 loss=1.4"},
			want:  []string{"5 - loss=1.5", "6 - loss=1.4"}},
		{name: "the lowest rank that prints a metric, from its second value",
			lines: []string{"[rank0]: step=1 tps=100", "[rank3]: step=1 loss=9.5", "[rank3]: step=2 loss=9.1", "[rank0]: step=2 tps=110", "[rank3]: step=3 loss=8.7", "[rank2]: step=3 loss=1.0"},
			want:  []string{"1 - tps=100", "2 - loss=9.1", "2 - tps=110", "3 - loss=8.7"}, progress: "step 2/? epoch ?/?"},
		{name: "each rank keeps its own step",
			lines: []string{"[rank1]:Epoch [2/2], Step [50/100], Loss: 0.4", "[rank0]:Epoch [1/2], Step [50/100], Loss: 0.5", "[rank0]:Epoch [1/2], Step [100/100], Loss: 0.45"},
			want:  []string{"50 1 loss=0.5", "100 1 loss=0.45"}, progress: "step 100/200 epoch 1/2"},
		{name: "progress of the lowest rank that shows any",
			lines: []string{"[rank2]: step=7 loss=0.5", "[rank1]: step=3 loss=0.6"},
			want:  nil, progress: "step 3/? epoch ?/?"},
		{name: "OpenMPI --tag-output",
			lines: []string{"[1,1]<stdout>:iter 10: loss 2.5", "[1,0]<stdout>:iter 10: loss 2.1", "[1,0]<stderr>:iter 20: loss 1.9"},
			want:  []string{"10 - loss=2.1", "20 - loss=1.9"}},
		{name: "progress words are no roles",
			lines: []string{"[step100]: loss=0.5", "[epoch2]: acc=0.9"},
			want:  []string{"1 - loss=0.5", "1 - acc=0.9"}},
		{name: "all ranks kept on request",
			opts:  []Option{AllRanks()},
			lines: []string{"[rank0]: step=10 loss=1.00", "[rank1]: step=10 loss=2.00", "[rank1]: step=20 loss=1.90"},
			want:  []string{"10 - loss=1", "10 - rank1/loss=2", "20 - rank1/loss=1.9"}},
		{name: "srun --label, once labels are seen going down twice (rank 1's first lines are read)",
			lines: []string{"0: step=1 loss=3.0", "1: step=1 loss=3.3", "0: step=2 loss=2.0", "1: step=2 loss=2.3", "0: step=3 loss=1.0", "1: step=3 loss=1.3", "srun: Job step aborted"},
			want:  []string{"1 - loss=3", "1 - loss=3.3", "2 - loss=2", "2 - loss=2.3", "3 - loss=1"}},
		{name: "a script's own numbered lines are not srun labels",
			lines: []string{"1: loss=0.9", "2: loss=0.8", "3: loss=0.7", "0: cat", "4: loss=0.6"},
			want:  []string{"1 - loss=0.9", "2 - loss=0.8", "3 - loss=0.7", "4 - loss=0.6"}},
	})
}

func TestTables(t *testing.T) {
	runLineCases(t, []lineCase{
		{name: "ultralytics: columns, a memory in bytes, counts left out, the bar's step",
			lines: []string{
				"      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size",
				"        1/100      2.51G      1.234      2.345      1.456         32        640: 100%|██████████| 8/8 [00:03<00:00,  2.45it/s]",
				"                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): 100%|██████████| 4/4 [00:01<00:00,  3.1it/s]",
				"                   all        128        929      0.668      0.541      0.621      0.461",
				"                person        128        254      0.812      0.669      0.771      0.532",
			},
			want: []string{"8 1 gpu_mem=2.51e+09", "8 1 box_loss=1.234", "8 1 cls_loss=2.345", "8 1 dfl_loss=1.456",
				"8 1 box_p=0.668", "8 1 box_r=0.541", "8 1 box_map50=0.621", "8 1 box_map50-95=0.461"},
			progress: "step 8/800 epoch 1/100"},
		{name: "fastai: a header, rows per epoch, #na# and clocks skipped",
			lines: []string{"epoch     train_loss  valid_loss  accuracy  time    ", "0         0.912345    #na#        0.701000  00:12     ", "1         0.512345    0.498765    0.801000  00:11     "},
			want:  []string{"1 0 train_loss=0.912345", "1 0 accuracy=0.701", "2 1 train_loss=0.512345", "2 1 valid_loss=0.498765", "2 1 accuracy=0.801"}},
		{name: "a Markdown table titled by the line above it",
			lines: []string{"Evaluation results for bbox: ", "|   AP   |  AP50  |  AP75  |", "|:------:|:------:|:------:|", "| 38.651 | 59.476 | 41.837 |"},
			want:  []string{"1 - bbox/ap=38.651", "1 - bbox/ap50=59.476", "1 - bbox/ap75=41.837"}},
		{name: "a table with repeated names is no table of measures",
			lines: []string{"| category | AP     | category | AP     |", "|:---------|:-------|:---------|:-------|", "| person   | 50.123 | bicycle  | 30.011 |"},
			want:  nil},
		{name: "columns that measure nothing are no table",
			lines: []string{"                   from  n    params  module                                       arguments", "  0                  -1  1       464  ultralytics.nn.modules.conv.Conv             [3, 16, 3, 2]"},
			want:  nil},
		{name: "a line with the header's width but words is no row",
			lines: []string{"epoch  loss  acc", "1  0.5  0.9", "loading  next  shard", "2  0.4  0.95"},
			want:  []string{"1 1 loss=0.5", "1 1 acc=0.9", "2 2 loss=0.4", "2 2 acc=0.95"}},
	})
}

func TestNames(t *testing.T) {
	runLineCases(t, []lineCase{
		{name: "Megatron: '|' fields, whole names, units in parentheses",
			lines: []string{" [2024-04-06 02:55:52] iteration       10/     100 | consumed samples:         1280 | elapsed time per iteration (ms): 2913.4 | throughput per GPU (TFLOP/s/GPU): 44.6 | learning rate: 3.000000E-05 | global batch size:   128 | lm loss: 1.082575E+01 | loss scale: 1.0 | grad norm: 5.123 | number of skipped iterations:   0 | number of nan iterations:   0 |"},
			want: []string{"10 - consumed_samples=1280", "10 - elapsed_time_per_iteration=2913.4", "10 - throughput_per_gpu=44.6", "10 - learning_rate=3e-05",
				"10 - lm_loss=10.82575", "10 - loss_scale=1", "10 - grad_norm=5.123"},
			progress: "step 10/100 epoch ?/?"},
		{name: "rates: a time unit after '/' is per second; time per thing is no metric",
			lines: []string{"step 3 | samples/sec: 250.1 | img/s: 13.6 | tokens/s 900 | words/batch 906 | s/checkpoint 7747 | sec/step: 0.4"},
			want:  []string{"3 - samples_per_sec=250.1", "3 - img_per_sec=13.6", "3 - tokens_per_sec=900", "3 - words_per_batch=906"}},
		{name: "labels: a split named by the line goes first",
			lines: []string{
				"Test: [  48/48]  Time: 0.194 (0.279)  Loss:   6.341 ( 5.902)  Acc@1:   8.125 (  7.000)",
				"2022-06-01 10:01:47 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 9.784 | ppl 653.48 | num_updates 300",
				"03/15 12:33:59 - mmengine - INFO - Epoch(val) [2][625/625]    coco/bbox_mAP: 0.0410  data_time: 0.0020",
				" validation loss at iteration 300 | lm loss value: 7.102934E+00 | lm loss PPL: 1.215528E+03 | ",
			},
			want: []string{"1 - test_time=0.194", "1 - test_loss=6.341", "1 - test_acc@1=8.125",
				"300 1 valid_loss=9.784", "300 1 valid_ppl=653.48",
				"300 2 coco/bbox_map=0.041", "300 2 val_data_time=0.002",
				"300 2 validation_lm_loss=7.102934", "300 2 validation_lm_loss_ppl=1215.528"}},
		{name: "a split word alone is no metric",
			lines: []string{"Train: 0 [ 100/1251 (  8%)]  Loss: 6.88 (6.91)  LR: 1.000e-04", "    train:      12800", "    validation: 1280"},
			want:  []string{"100 0 loss=6.88", "100 0 lr=0.0001"}},
		{name: "prose and glued words make no whole name",
			lines: []string{"Overriding model.yaml nc=80 with nc=80", "torch-2.1.0+cu121 CUDA:0 (Tesla T4, 15102MiB)", "The final model we trained has loss: 0.25"},
			want:  []string{"1 - loss=0.25"}},
	})
}

func TestStepShapes(t *testing.T) {
	runLineCases(t, []lineCase{
		{name: "DeepSpeed's steps beside metrics is the step; alone, a total",
			lines: []string{"steps: 1000", "steps: 10 loss: 2.3456 iter time (s): 0.512 samples/sec: 250.1"},
			want:  []string{"10 - loss=2.3456", "10 - iter_time=0.512", "10 - samples_per_sec=250.1"}, progress: "step 10/1000 epoch ?/?"},
		{name: "fairseq: a counter with spaces inside the epoch header, num_updates the step",
			lines: []string{"epoch 001:    100 / 1102 loss=12.566, nll_loss=12.376, num_updates=95, lr=1.2e-05", "epoch 002:    100 / 1102 loss=9.873, num_updates=1197"},
			want:  []string{"95 1 loss=12.566", "95 1 nll_loss=12.376", "95 1 lr=1.2e-05", "1197 2 loss=9.873"}},
		{name: "an epoch header and its counter without a colon",
			lines: []string{"| epoch 010  2000 / 8223 loss=1.27 (1.50), wps=962", "| epoch 011  1000 / 8223 loss=1.89 (1.38), wps=963"},
			want:  []string{"76007 10 loss=1.27", "76007 10 wps=962", "83230 11 loss=1.89", "83230 11 wps=963"}},
		{name: "timm: padded percentages inside the bracket, the epoch before it",
			lines: []string{"Train: 0 [1250/1251 (100%)]  Loss: 6.4 (6.5)", "Train: 1 [  50/1251 (  4%)]  Loss: 6.1 (6.2)"},
			want:  []string{"1250 0 loss=6.4", "1301 1 loss=6.1"}},
		{name: "well-known step keys",
			lines: []string{"global_step=5 loss=1", "iteration: 6 loss=0.9", "iter 7: loss 0.8", `{"num_updates": 8, "loss": 0.7}`, "[Rank 0] step=9, skipped=0, lr=[0.001], mom=[(0.9, 0.999)]"},
			want:  []string{"5 - loss=1", "6 - loss=0.9", "7 - loss=0.8", "8 - loss=0.7", "9 - lr=0.001"}},
		{name: "fairseq's JSON log quotes its numbers",
			lines: []string{
				`2021-01-05 22:41:34 | INFO | train_inner | {"epoch": 46, "update": 45.419, "loss": "609.299", "num_updates": "1400", "lr": "5e-05", "wall": "5247", "run": "a1"}`,
				`2021-01-05 22:42:30 | INFO | train | {"epoch": 46, "train_loss": "569.018", "train_num_updates": "1418", "train_wall": "5302"}`,
			},
			want: []string{"1400 46 loss=609.299", "1400 46 lr=5e-05", "1418 46 train_loss=569.018"}},
		{name: "MMSeg: Iter(train) is the step, Iter(val) another loop",
			lines:    []string{"Iter(train) [  50/40000]  lr: 1.0e-02  eta: 5:01:02  time: 0.41  loss: 1.23  decode.loss_ce: 0.81", "Iter(val) [500/500]    aAcc: 93.3000  mIoU: 70.1200  mAcc: 80.2000"},
			want:     []string{"50 - lr=0.01", "50 - time=0.41", "50 - loss=1.23", "50 - decode.loss_ce=0.81", "50 - val_aacc=93.3", "50 - val_miou=70.12", "50 - val_macc=80.2"},
			progress: "step 50/40000 epoch ?/?"},
		{name: "ultralytics' own bar",
			lines: []string{"      Epoch    GPU_mem   box_loss  Instances       Size", "\r\x1b[K        1/2      1.02G     0.8721         41        640: 33% ━━━━──────── 1/3 2.2it/s 0.5s<0.9s"},
			want:  []string{"1 1 gpu_mem=1.02e+09", "1 1 box_loss=0.8721"}, progress: "step 1/6 epoch 1/2"},
	})
}

func TestConfigurationEchoes(t *testing.T) {
	runLineCases(t, []lineCase{
		{name: "a line that names configuration: only totals",
			lines: []string{"hyperparameters: lr0=0.01, lrf=0.01, momentum=0.937, epochs=300"},
			want:  nil, progress: "step 0/? epoch ?/300"},
		{name: "options set to True, False or None",
			lines: []string{"engine/trainer: task=detect, model=yolov8n.pt, epochs=3, patience=100, save=True, cache=False, lr0=0.01"},
			want:  nil, progress: "step 0/? epoch ?/3"},
		{name: "a dump announced by its line, up to what is no more of it",
			lines: []string{"INFO:torchtune.utils._logging:Running FullFinetuneRecipeSingleDevice with resolved config:", "batch_size: 4", "epochs: 2", "optimizer:", "  _component_: torch.optim.AdamW", "  lr: 2.0e-05", "seed: null",
				"INFO:torchtune.utils._logging:Model is initialized with precision torch.bfloat16.", "loss: 0.5"},
			want: []string{"1 - loss=0.5"}, progress: "step 1/? epoch ?/2"},
		{name: "a dict printed as configuration",
			lines: []string{"[INFO] [config.py:978:print_user_config]   json = {", `    "steps_per_print": 10,`, `    "optimizer": {`, `        "params": {`, `            "lr": 0.001`, "        }", "    }", "}", "loss=0.5"},
			want:  []string{"1 - loss=0.5"}},
		{name: "quoted words are no pairs",
			lines: []string{"optimizer: 'optimizer=auto' found, ignoring 'lr0=0.01' and 'momentum=0.937'"},
			want:  nil},
		{name: "'key : value' only on a line that reports progress",
			lines: []string{"ppocr INFO:     epoch_num : 3", "ppocr INFO:     learning_rate : 0.0005", "Epoch : 1 | Loss : 0.5"},
			want:  []string{"1 1 loss=0.5"}},
		{name: "values with a unit after a space (but memory), lists and rows of values are not values",
			lines: []string{"step 1: max_mem_reserved: 6177 MB, avg_batch_cost: 0.18 s, bbox_mAP_copypaste: 0.024 0.059 0.015, copypaste: 70.9157,86.5672, ips: 355.1 samples/s"},
			want:  []string{"1 - max_mem_reserved=6.177e+09", "1 - ips=355.1"}},
	})
}
