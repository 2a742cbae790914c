// Stand-in for actions/cache/save (v4.2.3): saveOnlyRun of the real action, in short (a failed
// save is a warning, never a failed step).
const core = require('@actions/core');
const cache = require('@actions/cache');

async function run() {
  const key = core.getInput('key', { required: true });
  const paths = core.getInput('path', { required: true }).split('\n').map((s) => s.trim())
    .filter((s) => s !== '');
  const chunk = parseInt(core.getInput('upload-chunk-size') || '', 10);
  const crossOs = core.getInput('enableCrossOsArchive') === 'true';
  if (!cache.isFeatureAvailable()) {
    core.warning('Cache action is only supported on GHES version >= 3.5 or with ACTIONS_CACHE_URL set');
    return;
  }
  try {
    const id = await cache.saveCache(paths, key, { uploadChunkSize: Number.isNaN(chunk) ? undefined : chunk }, crossOs);
    if (id !== -1) {
      core.info(`Cache saved with key: ${key}`);
    }
  } catch (error) {
    core.warning(error.message);
  }
}

run().catch((error) => core.warning(error.message));
