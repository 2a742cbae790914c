// Stand-in for actions/cache/restore (v4.2.3): restoreImpl of the real action, in short.
const core = require('@actions/core');
const cache = require('@actions/cache');

function list(name, required) {
  return core.getInput(name, { required }).split('\n').map((s) => s.trim()).filter((s) => s !== '');
}

async function run() {
  const key = core.getInput('key', { required: true });
  core.setOutput('cache-primary-key', key);
  core.saveState('CACHE_KEY', key);
  const restoreKeys = list('restore-keys', false);
  const paths = list('path', true);
  const crossOs = core.getInput('enableCrossOsArchive') === 'true';
  const failOnMiss = core.getInput('fail-on-cache-miss') === 'true';
  const lookupOnly = core.getInput('lookup-only') === 'true';
  if (!cache.isFeatureAvailable()) {
    core.warning('Cache action is only supported on GHES version >= 3.5 or with ACTIONS_CACHE_URL set');
    core.setOutput('cache-hit', 'false');
    return;
  }
  const matched = await cache.restoreCache(paths, key, restoreKeys, { lookupOnly }, crossOs);
  if (!matched) {
    if (failOnMiss) {
      throw new Error(`Failed to restore cache entry. Exiting as fail-on-cache-miss is set. Input key: ${key}`);
    }
    core.info(`Cache not found for input keys: ${[key, ...restoreKeys].join(', ')}`);
    core.setOutput('cache-hit', 'false');
    return;
  }
  core.saveState('CACHE_RESULT', matched);
  core.setOutput('cache-matched-key', matched);
  const exact = key.localeCompare(matched, undefined, { sensitivity: 'accent' }) === 0;
  core.setOutput('cache-hit', exact.toString());
  core.info(`Cache restored from key: ${matched}`);
}

run().catch((error) => core.setFailed(error.message));
