#!/usr/bin/env bash
# Install the headless browser the UI's end-to-end test drives: Debian's Chromium and the
# matching ChromeDriver (/usr/bin/chromium, /usr/bin/chromedriver). Nothing is downloaded
# by the test itself at run time. Idempotent: does nothing when both are already there.
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    echo "install_browser: chromium and chromedriver already installed"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
/usr/bin/chromium --version
/usr/bin/chromedriver --version
