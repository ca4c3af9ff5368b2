"""One Streamlit page script per module (run by ``st.navigation`` in :mod:`ctda.ui.app`)."""
