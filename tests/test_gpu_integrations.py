"""The training frameworks' callbacks on a GPU, with the real packages and a tiny model built here (no downloads): a
step that reads its loss with ``.item()`` every step is caught, at the line of the user's code, with
``fail_on_wait=True`` stopping the run; one that keeps its loss on the GPU passes. Skipped without a GPU, PyTorch or
the framework."""

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch", reason="needs PyTorch")


def _lightning_module(read_loss: bool):
    import lightning.pytorch as pl

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(512, 512)
            self.kept = []

        def training_step(self, batch, batch_idx):
            loss = self.layer(batch).square().mean()
            if read_loss:
                self.kept.append(loss.item())  # the loss read on the host every step: waits
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e-3)

        def train_dataloader(self):
            return torch.utils.data.DataLoader(torch.randn(64, 512), batch_size=4)

    return Tiny()


@pytest.mark.parametrize("read_loss", [True, False], ids=["item-every-step", "loss-kept-on-gpu"])
def test_lightning_catches_an_item_and_passes_a_step_that_keeps_its_loss(tmp_path, read_loss):
    pytest.importorskip("lightning", reason="needs PyTorch Lightning (the lightning extra)")
    import lightning.pytorch as pl

    from bench.integrations.lightning import SyncsCallback
    from bench.usercode.syncs.checks import WaitedForGpu

    callback = SyncsCallback(step=4, fail_on_wait=True)
    trainer = pl.Trainer(accelerator="gpu", devices=1, max_steps=8, callbacks=[callback], default_root_dir=tmp_path,
                         enable_progress_bar=False, enable_model_summary=False, logger=False,
                         enable_checkpointing=False)
    if read_loss:
        with pytest.raises(WaitedForGpu, match=r"test_gpu_integrations.py:\d+"):
            trainer.fit(_lightning_module(True))
        assert any("self.kept.append(loss.item())" in place.source for place in callback.found.syncs.places)
    else:
        trainer.fit(_lightning_module(False))
        assert not [place for place in callback.found.syncs.places
                    if "test_gpu_integrations" in place.file], str(callback.found.syncs)
    assert [path.suffix for path in callback.found.files] == [".txt", ".json"]


class _Data(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, index):
        return {"x": torch.randn(512)}


def _hf_model(read_loss: bool):
    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(512, 512)
            self.kept = []

        def forward(self, x):
            loss = self.layer(x).square().mean()
            if read_loss:
                self.kept.append(loss.item())  # the loss read on the host every step: waits
            return {"loss": loss}

    return Tiny()


@pytest.mark.parametrize("read_loss", [True, False], ids=["item-every-step", "loss-kept-on-gpu"])
def test_transformers_catches_an_item_and_passes_a_step_that_keeps_its_loss(tmp_path, read_loss):
    pytest.importorskip("transformers", reason="needs transformers (the transformers extra)")
    pytest.importorskip("accelerate", reason="needs accelerate (the transformers extra)")
    from transformers import Trainer, TrainingArguments

    from bench.integrations.transformers import SyncsCallback
    from bench.usercode.syncs.checks import WaitedForGpu

    callback = SyncsCallback(step=4, fail_on_wait=True)
    # by default the Trainer waits twice a step on its own, as the callback named them on an H100: its NaN filter reads
    # every step's loss on the host (trainer.py's torch.isnan(tr_loss_step)) and accelerate copies each batch to the
    # GPU with a blocking copy (operations.py's tensor.to(device, non_blocking=False)); a step that keeps its loss on
    # the GPU turns both off
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=8, per_device_train_batch_size=4, report_to=[],
                             logging_steps=1000, save_strategy="no", disable_tqdm=True,
                             logging_nan_inf_filter=False, accelerator_config={"non_blocking": True})
    trainer = Trainer(model=_hf_model(read_loss), args=args, train_dataset=_Data(), callbacks=[callback])
    if read_loss:
        with pytest.raises(WaitedForGpu, match=r"test_gpu_integrations.py:\d+"):
            trainer.train()
    else:
        trainer.train()
        assert not [place for place in callback.found.syncs.places
                    if "test_gpu_integrations" in place.file], str(callback.found.syncs)
    assert [path.suffix for path in callback.found.files] == [".txt", ".json"]
